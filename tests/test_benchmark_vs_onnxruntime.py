"""benchmarks/vs_onnxruntime.py --quick: every row of issue 12's table is measured and printed
(small models, one round). Speed is not asserted here: the README quotes the full command."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.kernels.levels import RUNNABLE, best_level

pytest.importorskip("onnxruntime")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "vs_onnxruntime.py"
LABELS = ["ResNet-50 batch 1", "ResNet-50 batch 8", "MobileNetV2 batch 1", "MobileNetV2 batch 2", "MobileNetV2 batch 8",
          "MobileNetV3-Large batch 1",
          "PP-LCNet x1.0 (paddle2onnx, opset 11) batch 1", "ViT-B/16 batch 1", "BERT-base seq 128 batch 1", "BERT-small seq 128 batch 1",
          "MobileNetV2 int8 QDQ (quantize_static) batch 1", "MobileNetV2 int8 QDQ (quantize_static) batch 2",
          "MobileNetV2 int8 QOperator batch 1",
          "BERT-small int8 dynamic (quantize_dynamic) seq 128",
          "OCR detector (DBNet, PP-LCNet) 160x960", "OCR detector (DBNet, PP-LCNet) 640x480",
          "OCR detector (DBNet, PP-LCNet) 160x960, dynamic N, H, W",
          "OCR recogniser (PP-LCNet + BiLSTM) 48x320 batch 1", "OCR recogniser (PP-LCNet + BiLSTM) 48x320 batch 2",
          "YOLOv8n-style detector 640x640", "GPT-2-small-size decoder prefill seq 128",
          "GPT-2-small-size decoding step, 127 past tokens",
          "LLaMA-style decoding step (8 layers, hidden 1024, GQA 16/4), 128 past tokens",
          "Whisper-tiny-style encoder (4 layers, d 384), 80 x 3000 frames", "Whisper-tiny-style classifier batch 1",
          "Whisper-tiny-style classifier batch 2", "Whisper-tiny-style classifier int8 QDQ (quantize_static) batch 1",
          "Whisper-tiny-style classifier int8 QDQ (quantize_static) batch 2",
          "1000 tiny elementwise ops, per node", "a 2-node model, per call", "compile + load, BERT-base",
          "peak RSS, load ResNet-50 + run"]


def test_quick_prints_every_row(tmp_path):
    out = tmp_path / "table.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    table = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| workload | ge | onnxruntime | ge / onnxruntime |")
    assert [line.split(" | ")[0][2:] for line in table[2:]] == LABELS
    head = "ge int8 / ge float32, "  # every int8 row beside its float32 build
    assert [line[len(head):].split(": ")[0] for line in proc.stdout.splitlines() if line.startswith(head)] == \
        [label for label in LABELS if "int8" in label]
    rows = json.loads(out.read_text())["rows"]
    assert [r["workload"] for r in rows] == LABELS
    for r in rows:  # each engine measured something in its own process
        assert r["ge"] > 0 and r["onnxruntime"] > 0 and r["ratio"] > 0
        assert len(r["rounds"]) == 1 and set(r["rounds"][0]) == {"ge", "onnxruntime"}


def test_only_and_unknown_rows():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--only", "two_node"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stdout.splitlines() if line.startswith("| a 2-node")]
    assert "ResNet-50" not in proc.stdout
    bad = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--only", "vgg"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown rows" in bad.stderr


@pytest.mark.parametrize("level", ["lowest", "numpy"])
def test_level_runs_ge_at_another_native_level(level):
    """--level: ge's workers at the lowest level this CPU runs (or on the numpy plans), beside onnxruntime
    in one run; the title names ge's kernels and the CPU."""
    if level == "lowest":
        level = RUNNABLE[0] if RUNNABLE else best_level()
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--only", "two_node", "--level", level],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    title = proc.stdout.splitlines()[0]
    assert f"--level {level} " in title and " CPU: " in title
    assert (f"ge's kernels: native {level} (" in title) if level != "numpy" else \
        ("ge's kernels: numpy fallback: GE_NO_NATIVE is set" in title)
    assert [line for line in proc.stdout.splitlines() if line.startswith("| a 2-node")]


def test_a_level_this_cpu_cannot_run_is_refused():
    bad = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--only", "two_node", "--level", "v9"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--level v9: GE_NATIVE_LEVEL=v9 is not a level of this machine" in bad.stderr


def test_as_avx2_cpu_runs_both_engines_as_on_an_avx2_cpu():
    """--as-avx2-cpu: ge at v3 and onnxruntime with its AVX2 kernels, the title says so."""
    from tests.platforms import avx2_cpu
    if avx2_cpu.unavailable():
        pytest.skip(f"cannot pose as an AVX2 CPU: {avx2_cpu.unavailable()}")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--only", "two_node", "--as-avx2-cpu"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    title = proc.stdout.splitlines()[0]
    assert "--as-avx2-cpu --level v3 " in title and "ge's kernels: native v3 (" in title
    assert title.endswith("posing as an AVX2 CPU without AVX-512 (CPUID masked)")
