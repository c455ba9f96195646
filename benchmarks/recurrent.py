"""ge against onnxruntime on recurrent layers of real models, each engine in its own process.

    python benchmarks/recurrent.py [--rounds 5] [--only crnn_b1_t40,gru_t100] [--single-thread]

One-node models (weights as initializers, random), compiled once by ge (cpu device), then measured
round after round by benchmarks/vs_onnxruntime.py's workers (a fresh process per engine and row,
the engine going first alternating; the medians' ratio, ge / onnxruntime, lower is better).
--single-thread: one thread per engine, latencies in CPU time (see vs_onnxruntime.py).

Rows (--only takes their keys):
  crnn_b1_t40 crnn_b1_t80 crnn_b8_t40 crnn_b8_t80
             a CRNN / PP-OCR recognizer's bidirectional LSTM: input 512, hidden 256, T steps, batch 1 or 8
  gru_t100   a speech model's GRU: input 256, hidden 512, 100 steps, batch 1, linear_before_reset=1
             (as PyTorch exports it)
  lstm_lens  a unidirectional LSTM over a padded batch of 4 (input 128, hidden 256, 60 steps),
             sequence_lens 60, 45, 30, 12
  vad_step   a voice-activity detector's LSTM: one step per call (input 64, hidden 64), the state
             passed in and out
"""
from __future__ import annotations

import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vs_onnxruntime as bench  # noqa: E402

# key -> (label, op, input size, hidden, T, batch, attributes, sequence_lens, initial states as inputs, runs)
ROWS = {
    "crnn_b1_t40": ("CRNN BiLSTM 512->256, T=40, batch 1", "LSTM", 512, 256, 40, 1, {"direction": "bidirectional"},
                    None, False, 40),
    "crnn_b1_t80": ("CRNN BiLSTM 512->256, T=80, batch 1", "LSTM", 512, 256, 80, 1, {"direction": "bidirectional"},
                    None, False, 30),
    "crnn_b8_t40": ("CRNN BiLSTM 512->256, T=40, batch 8", "LSTM", 512, 256, 40, 8, {"direction": "bidirectional"},
                    None, False, 20),
    "crnn_b8_t80": ("CRNN BiLSTM 512->256, T=80, batch 8", "LSTM", 512, 256, 80, 8, {"direction": "bidirectional"},
                    None, False, 15),
    "gru_t100": ("GRU 256->512, T=100, batch 1, linear_before_reset=1", "GRU", 256, 512, 100, 1,
                 {"linear_before_reset": 1}, None, False, 20),
    "lstm_lens": ("LSTM 128->256, T=60, batch 4, sequence_lens", "LSTM", 128, 256, 60, 4, {}, [60, 45, 30, 12],
                  False, 30),
    "vad_step": ("VAD LSTM 64->64, one step per call", "LSTM", 64, 64, 1, 1, {}, None, True, 2000),
}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def build(op, I, H, T, B, attrs, lens, state_inputs):
    """One recurrent node, layout 0: X [T, B, I] (and initial states) in, Y and the final states out."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    D = 2 if attrs.get("direction") == "bidirectional" else 1
    G = GATES[op]
    weight = lambda *s: numpy_helper.from_array((rng.standard_normal(s) / np.sqrt(H)).astype(np.float32))  # noqa: E731
    inits = [weight(D, G * H, I), weight(D, G * H, H), weight(D, 2 * G * H)]
    for t, name in zip(inits, "WRB"):
        t.name = name
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I])]
    names = ["X", "W", "R", "B", ""]
    if lens is not None:
        inits.append(numpy_helper.from_array(np.asarray(lens, np.int32), "lens"))
        names[4] = "lens"
    states = ["h0", "c0"][:2 if op == "LSTM" else 1]
    if state_inputs:
        names += states
        inputs += [helper.make_tensor_value_info(s, TensorProto.FLOAT, [D, B, H]) for s in states]
    while not names[-1]:
        names.pop()
    outs = ["Y", "Y_h", "Y_c"][:3 if op == "LSTM" else 2]
    node = helper.make_node(op, names, outs, hidden_size=H, **attrs)
    shapes = [[T, D, B, H]] + [[D, B, H]] * (len(outs) - 1)
    graph = helper.make_graph([node], op.lower(), inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, s) for o, s in zip(outs, shapes)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def prepare(rows: list, tmp: str) -> dict:
    """Each row's ONNX file, inputs (.npz) and ge's OM: {key: job} for vs_onnxruntime's workers."""
    import numpy as np
    import onnx
    from ge.core import api
    jobs = {}
    for row in rows:
        base = os.path.join(tmp, row.key)
        model = build(*row.build[1])
        onnx.save(model, base + ".onnx")
        feeds = bench.feeds_for(model, None, 0)
        np.savez(base + ".npz", **feeds)
        spec = ";".join(f"{k}:{','.join(map(str, v.shape))}" for k, v in feeds.items())
        om = api.atc(base + ".onnx", base, input_shape=spec).om_path
        jobs[row.key] = dict(onnx=base + ".onnx", npz=base + ".npz", om=om, kind="latency", runs=row.runs, nodes=1)
    return jobs


def main(argv=None) -> int:
    parser = bench.platform_args(bench.rows_parser(__doc__, 5))
    args = parser.parse_args(argv)
    only = [k for k in args.only.split(",") if k]
    unknown = set(only) - set(ROWS)
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; choose from {', '.join(ROWS)}")
    rows = []
    for key, (label, *spec, runs) in ROWS.items():
        if not only or key in only:
            unit = "us" if key == "vad_step" else "ms"
            row = bench.Row(key, label, "per_call" if unit == "us" else "latency", ("recurrent", tuple(spec)),
                            "<= 1.0", runs=runs)
            rows.append(row)
    results: dict = {r.key: [] for r in rows}
    launcher = bench.start_launcher(parser, args)
    try:
        with tempfile.TemporaryDirectory(prefix="ge_recurrent_") as tmp:
            jobs = prepare(rows, tmp)
            bench.run_rounds(launcher, rows, jobs, args.rounds, args.single_thread, results)
    finally:
        launcher.close()
    print(f"python benchmarks/recurrent.py{bench.platform_flags(args)} --rounds {args.rounds}"
          f"{' --only ' + args.only if only else ''}: {bench.conditions(results, args.single_thread)}")
    print(bench.render(bench.summarize(rows, results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
