"""ais_bench.infer.interface: InferSession and MultiDeviceSession on ge's aclruntime.

    from ais_bench.infer.interface import InferSession     # PYTHONPATH=$(ge shim path)
    session = InferSession(0, "net.om")
    outputs = session.infer([x])                            # a list of numpy arrays
    outputs = session.infer([x], mode="dymshape", custom_sizes=10000000)
    print(np.mean(session.summary().exec_time_list))        # ms per execution

Both spellings of every version are here: `summary()`/`sumary()`, `reset_summaryinfo()`/
`reset_sumaryinfo()`. Feeds are numpy arrays, numpy scalars, aclruntime Tensors or torch tensors
(anything with `.numpy()`); as in ais_bench, an input is taken as its bytes, so a float32 array fed
to a float16 input is refused by its size ("Check i:0 name:x in size:... needsize:... not match"):
cast it first, as ais_bench's users do.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import aclruntime
from ..aclruntime import AclRuntimeError, InferenceSession, Tensor, check_device_id, session_options
from ..aipp import read_aipp_params
from ..inference import read_acl_json

MODES = ("static", "dymbatch", "dymhw", "dymdims", "dymshape")
DEFAULT_CUSTOM_SIZE = 100000  # ais_bench's default output buffer bytes of a dymshape run


class InferSession:
    def __init__(self, device_id: int, model_path: str, acl_json_path: str | None = None, debug: bool = False,
                 loop: int = 1):
        check_device_id(device_id)
        if isinstance(loop, bool) or not isinstance(loop, (int, np.integer)) or loop < 1:
            raise AclRuntimeError(f"loop:{loop} is invalid: a positive integer")
        if not os.path.isfile(model_path):
            raise AclRuntimeError(f"model path:{model_path} is not a file")
        _check_acl_json(acl_json_path)
        self.device_id, self.model_path, self.loop, self.debug = device_id, model_path, loop, debug
        self.acl_json_path = acl_json_path
        self.options = session_options()
        self.options.loop = loop
        self.options.log_level = 1 if debug else 2
        self.options.acl_json_path = acl_json_path or ""
        self.session = InferenceSession(model_path, device_id, self.options)
        self.outputs_names = [d.name for d in self.session.get_outputs()]
        self.intensors_desc = self.session.get_inputs()
        self.outtensors_desc = self.session.get_outputs()
        self.infer_mode_switch = {"static": self._static_prepare, "dymbatch": self._dymbatch_prepare,
                                  "dymhw": self._dymhw_prepare, "dymdims": self._dymdims_prepare,
                                  "dymshape": self._dymshape_prepare}

    # -- descriptions and settings ----------------------------------------------------------------
    def get_inputs(self):
        self.intensors_desc = self.session.get_inputs()
        return self.intensors_desc

    def get_outputs(self):
        self.outtensors_desc = self.session.get_outputs()
        return self.outtensors_desc

    def set_loop_count(self, loop: int) -> None:
        self.session.options().loop = loop

    def set_staticbatch(self) -> None:
        self.session.set_staticbatch()

    def set_dynamic_batchsize(self, dym_batch) -> None:
        self.session.set_dynamic_batchsize(int(dym_batch))

    def set_dynamic_hw(self, h: int, w: int) -> None:
        self.session.set_dynamic_hw(h, w)

    def get_max_dym_batchsize(self) -> int:
        return self.session.get_max_dym_batchsize()

    def set_dynamic_dims(self, dym_dims: str) -> None:
        self.session.set_dynamic_dims(dym_dims)

    def set_dynamic_shape(self, dym_shape: str) -> None:
        self.session.set_dynamic_shape(dym_shape)

    def set_custom_outsize(self, custom_sizes) -> None:
        self.session.set_custom_outsize(custom_sizes)

    def get_dym_aipp_input_exist(self) -> bool:
        return self.session.get_dym_aipp_input_exist()

    def check_dym_aipp_input_exist(self) -> None:
        self.session.check_dym_aipp_input_exist()

    def load_aipp_config_file(self, config_file: str, batchsize: int) -> int:
        """ais_bench's --aipp_config: the .config's settings through aclruntime's aipp_set_* calls, for
        every image of the batch; runs then leave out the ascend_dynamic_aipp_data input."""
        p = read_aipp_params(config_file, batchsize)
        im, s = p.images[0], self.session
        s.aipp_set_max_batch_size(batchsize)
        s.aipp_set_input_format(p.input_format)
        s.aipp_set_src_image_size(list(p.src_size))
        s.aipp_set_rbuv_swap_switch(int(p.rbuv_swap_switch))
        s.aipp_set_ax_swap_switch(int(p.ax_swap_switch))
        s.aipp_set_csc_params([int(p.csc_switch), *(v for row in p.matrix for v in row), *p.output_bias,
                               *p.input_bias])
        s.aipp_set_crop_params([int(im.crop), *im.crop_pos, *im.crop_size])
        s.aipp_set_padding_params([int(im.padding), *im.padding_size])
        s.aipp_set_dtc_pixel_mean(list(im.mean))
        s.aipp_set_dtc_pixel_min(list(im.min))
        s.aipp_set_pixel_var_reci(list(im.var_reci))
        return s.set_dym_aipp_info_set()

    def create_tensor_from_fileslist(self, desc, files) -> Tensor:
        return self.session.create_tensor_from_fileslist(desc, files)

    def create_tensor_from_arrays_to_device(self, arrays) -> Tensor:
        tensor = Tensor(arrays)
        tensor.to_device(self.device_id)
        return tensor

    @staticmethod
    def convert_tensors_to_host(tensors) -> None:
        for t in tensors:
            t.to_host()

    @staticmethod
    def convert_tensors_to_arrays(tensors) -> list[np.ndarray]:
        return [np.array(t) for t in tensors]

    # -- runs ---------------------------------------------------------------------------------------
    def run(self, feeds, out_array: bool = False):
        outputs = self.session.run(self.outputs_names, feeds)
        if out_array:
            self.convert_tensors_to_host(outputs)
            return self.convert_tensors_to_arrays(outputs)
        return outputs

    def infer(self, feeds, mode: str = "static", custom_sizes=DEFAULT_CUSTOM_SIZE, out_array: bool = True):
        """Run once (`loop` times) on `feeds` after setting the gear or shape `mode` asks from their
        shapes; numpy arrays, or device Tensors with out_array=False."""
        if not isinstance(out_array, bool):
            raise AclRuntimeError(f"out_array:{out_array} is not a bool")
        inputs, shapes = _feeds(feeds)
        self._prepare(mode, shapes, custom_sizes)
        return self.run(inputs, out_array)

    def infer_pipeline(self, feeds_list, mode: str = "static", custom_sizes=DEFAULT_CUSTOM_SIZE):
        """infer() of each feeds in turn, each with its own shapes: a list of output lists."""
        results = []
        for feeds in feeds_list:
            inputs, shapes = _feeds(feeds)
            self._prepare(mode, shapes, custom_sizes)
            results.append(self.run(inputs, True))
        return results

    def infer_iteration(self, feeds, in_out_list=None, iteration_times: int = 1, mode: str = "static",
                        custom_sizes=DEFAULT_CUSTOM_SIZE, mem_copy: bool = True):
        """Run `iteration_times` times, input i taking the last run's output in_out_list[i] where
        that is >= 0 ([-1, 0] feeds output 0 back as input 1)."""
        if isinstance(iteration_times, bool) or not isinstance(iteration_times, int) or iteration_times < 1:
            raise AclRuntimeError(f"iteration_times:{iteration_times} is not a positive integer")
        in_out_list = list(in_out_list or [])
        n_in, n_out = len(self.get_inputs()), len(self.get_outputs())
        if iteration_times > 1 and (len(in_out_list) != n_in or any(not -1 <= k < n_out for k in in_out_list)):
            raise AclRuntimeError("inputs' amount and length of in_out_list not matched!" if len(in_out_list) != n_in
                                  else f"in_out_list {in_out_list}: each entry is -1 or an output index below {n_out}")
        inputs, shapes = _feeds(feeds)
        self._prepare(mode, shapes, custom_sizes)
        outputs = self.run(inputs)
        for _ in range(iteration_times - 1):
            inputs = [outputs[k] if k >= 0 else x for x, k in zip(inputs, in_out_list)]
            outputs = self.run(inputs)
        return self.convert_tensors_to_arrays(self._host(outputs))

    @staticmethod
    def _host(tensors):
        for t in tensors:
            t.to_host()
        return tensors

    def _prepare(self, mode: str, shapes, custom_sizes) -> None:
        prepare = self.infer_mode_switch.get(mode)
        if prepare is None:
            raise AclRuntimeError(f'wrong infer_mode:{mode}, only support "static","dymbatch","dymhw","dymdims",'
                                  '"dymshape"')
        prepare(shapes, custom_sizes)

    def _static_prepare(self, shapes, custom_sizes) -> None:
        self.set_staticbatch()

    def _dymbatch_prepare(self, shapes, custom_sizes) -> None:
        indesc = self._matched(shapes)
        for shape, desc in zip(shapes, indesc):
            for dim, want in zip(shape, desc.shape):
                if want < 0:
                    self.set_dynamic_batchsize(dim)
                    return
                if want != dim:
                    raise AclRuntimeError("input datas and intensors dim not matched!")
        raise AclRuntimeError("not a dymbatch model!")

    def _dymhw_prepare(self, shapes, custom_sizes) -> None:
        for shape, desc in zip(shapes, self._matched(shapes)):
            if len(desc.shape) == 4 and desc.shape[2] < 0 and desc.shape[3] < 0:
                self.set_dynamic_hw(shape[2], shape[3])
                return
        raise AclRuntimeError("not a dymhw model!")

    def _dymdims_prepare(self, shapes, custom_sizes) -> None:
        self.set_dynamic_dims(_shape_spec(self._matched(shapes), shapes))

    def _dymshape_prepare(self, shapes, custom_sizes) -> None:
        self.set_dynamic_shape(_shape_spec(self._matched(shapes), shapes))
        if isinstance(custom_sizes, (int, np.integer)) and not isinstance(custom_sizes, bool):
            custom_sizes = [int(custom_sizes)] * len(self.outputs_names)
        elif not isinstance(custom_sizes, list):
            raise AclRuntimeError(f"custom_sizes:{custom_sizes} type:{type(custom_sizes)} invalid")
        self.set_custom_outsize(custom_sizes)

    def _matched(self, shapes):
        indesc = self.get_inputs()
        if len(shapes) != len(indesc):
            raise AclRuntimeError("input datas and intensors nums not matched!")
        return indesc

    # -- summary and teardown --------------------------------------------------------------------------
    def summary(self):
        return self.session.sumary()

    sumary = summary  # ais_bench 2023's spelling

    def reset_summaryinfo(self) -> None:
        self.session.reset_sumaryinfo()

    reset_sumaryinfo = reset_summaryinfo

    def free_resource(self) -> None:
        self.session.free_resource()

    @staticmethod
    def finalize() -> None:
        InferenceSession.finalize()


def _feeds(feeds) -> tuple[list, list]:
    """The inputs and their shapes, as ais_bench reads feeds: arrays (made contiguous), numpy
    scalars (shape [1]), aclruntime Tensors, torch tensors (by their .numpy())."""
    inputs, shapes = [], []
    for feed in feeds:
        if isinstance(feed, np.ndarray):
            x = np.ascontiguousarray(feed)
            shape = x.shape
        elif isinstance(feed, np.generic):
            x, shape = np.array(feed), [feed.size]
        elif isinstance(feed, Tensor):
            x, shape = feed, feed.shape
        elif callable(getattr(feed, "numpy", None)):  # torch.Tensor, never imported here
            x = np.ascontiguousarray(feed.numpy())
            shape = x.shape
        else:
            raise AclRuntimeError(f"type:{type(feed)} invalid")
        inputs.append(x)
        shapes.append(shape)
    return inputs, shapes


def _shape_spec(descs, shapes) -> str:
    return ";".join(f"{d.name}:{','.join(str(v) for v in s)}" for d, s in zip(descs, shapes))


def _check_acl_json(path: str | None) -> None:
    if path is None:
        return
    cfg = read_acl_json(path)
    if cfg["profiler"] or cfg["dump"]:
        raise AclRuntimeError(f"acl_json_path {path}: its profiler/dump settings are run by `ge run --acl_json_path` "
                              "(an InferSession runs without them)")


class MultiDeviceSession:
    """One InferSession per (device, feeds), all at once on threads (ais_bench uses a process
    each): `infer({0: [feeds_a, feeds_b], 1: [feeds_c]})` -> {0: [outputs_a, outputs_b], 1: [...]};
    `summary` holds each one's wall time in ms, per device."""

    def __init__(self, model_path: str, acl_json_path: str | None = None, debug: bool = False, loop: int = 1):
        self.model_path, self.acl_json_path, self.debug, self.loop = model_path, acl_json_path, debug, loop
        self.summary: dict = {}

    def infer(self, device_feeds: dict, mode: str = "static", custom_sizes=DEFAULT_CUSTOM_SIZE):
        return self._each(device_feeds, lambda s, feeds: s.infer(feeds, mode, custom_sizes, out_array=True))

    def infer_pipeline(self, device_feeds_list: dict, mode: str = "static", custom_sizes=DEFAULT_CUSTOM_SIZE):
        return self._each(device_feeds_list, lambda s, feeds_list: s.infer_pipeline(feeds_list, mode, custom_sizes))

    def infer_iteration(self, device_feeds: dict, in_out_list=None, iteration_times: int = 1, mode: str = "static",
                        custom_sizes=DEFAULT_CUSTOM_SIZE, mem_copy: bool = True):
        return self._each(device_feeds, lambda s, feeds: s.infer_iteration(feeds, in_out_list, iteration_times, mode,
                                                                           custom_sizes, mem_copy))

    def _each(self, device_feeds: dict, call):
        jobs = [(device, feeds) for device, items in device_feeds.items() for feeds in items]

        def one(job):
            device, feeds = job
            session = InferSession(device, self.model_path, self.acl_json_path, self.debug, self.loop)
            try:
                start = time.time()
                outputs = call(session, feeds)
                return device, outputs, (time.time() - start) * 1e3
            finally:
                session.free_resource()

        with ThreadPoolExecutor(max(1, len(jobs)), thread_name_prefix="ais-bench-device") as pool:
            results = list(pool.map(one, jobs))
        outputs: dict = {}
        self.summary.clear()
        for device, out, ms in results:
            outputs.setdefault(device, []).append(out)
            self.summary.setdefault(device, []).append(ms)
        return outputs


class MemorySummary:
    """The copy times (ms) of this process's runs, as ais_bench reads them for --display_all_summary."""

    @staticmethod
    def get_h2d_time_list() -> list[float]:
        return list(aclruntime.MemorySummary.H2D_time_list)

    @staticmethod
    def get_d2h_time_list() -> list[float]:
        return list(aclruntime.MemorySummary.D2H_time_list)

    get_H2D_time_list, get_D2H_time_list = get_h2d_time_list, get_d2h_time_list  # older spellings

    @staticmethod
    def reset() -> None:
        aclruntime.MemorySummary().reset()
