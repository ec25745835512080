"""Benchmark of stableops::get_cuda_view_from_cpu_tensor (UVA views).

Reports:
  * GPU read bandwidth through a UVA view of pinned host memory, two ways:
      - copy:  dst.copy_(view)  (device-side copy reading host memory)
      - sum:   view.sum()       (a reduction kernel reading host memory)
    against a plain pinned host-to-device copy dst.copy_(host) of the same
    bytes (target: view read >= 90% of the H2D copy bandwidth);
  * the host cost of creating a view (median us per call over many calls,
    through the stableops.ops wrapper and through torch.ops directly;
    target <= 10 us).

Run (stableops installed or on PYTHONPATH):
    python benchmarks/uva.py [--json=uva.json]
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("json", None, "Write the results as JSON to this path.")
flags.DEFINE_integer("mbytes", 256, "Size of the pinned buffer in MiB.")
flags.DEFINE_integer("reps", 10, "Timed repetitions per bandwidth measurement (median).")
flags.DEFINE_integer("view_calls", 2000, "Calls per batch when timing view creation.")
flags.DEFINE_integer("view_batches", 15, "Batches when timing view creation (median).")


def gpu_time_ms(fn, reps):
    fn()  # warm-up
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def host_us_per_call(fn, calls, batches):
    for _ in range(100):
        fn()
    per_call = []
    for _ in range(batches):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter_ns() - t0) / calls / 1e3)
    return statistics.median(per_call)


def main(argv):
    del argv
    if not torch.cuda.is_available():
        print("no CUDA GPU visible: nothing to benchmark")
        return 0
    import stableops  # noqa: F401
    from stableops import ops

    get_view = getattr(ops, "get_cuda_view_from_cpu_tensor", None) or (
        torch.ops.stableops.get_cuda_view_from_cpu_tensor
    )
    raw = torch.ops.stableops.get_cuda_view_from_cpu_tensor.default

    nbytes = FLAGS.mbytes << 20
    n = nbytes // 4
    host = torch.empty(n, dtype=torch.float32).pin_memory()
    host.fill_(1.0)
    view = get_view(host)
    dst = torch.empty(n, dtype=torch.float32, device="cuda")

    h2d_ms = gpu_time_ms(lambda: dst.copy_(host, non_blocking=True), FLAGS.reps)
    copy_ms = gpu_time_ms(lambda: dst.copy_(view), FLAGS.reps)
    out = torch.empty((), device="cuda")
    sum_ms = gpu_time_ms(lambda: torch.sum(view, dim=0, out=out), FLAGS.reps)
    assert out.item() == n, "view.sum() read wrong data"

    gbs = lambda ms: nbytes / (ms * 1e-3) / 1e9
    res = dict(
        device=torch.cuda.get_device_name(),
        bytes=nbytes,
        h2d_copy_gbs=gbs(h2d_ms),
        view_copy_gbs=gbs(copy_ms),
        view_sum_gbs=gbs(sum_ms),
    )
    res["view_copy_pct_of_h2d"] = 100 * res["view_copy_gbs"] / res["h2d_copy_gbs"]
    res["view_sum_pct_of_h2d"] = 100 * res["view_sum_gbs"] / res["h2d_copy_gbs"]

    small = torch.empty(1024, dtype=torch.float32).pin_memory()
    sliced = torch.empty(64, 64, dtype=torch.bfloat16).pin_memory()[3:, ::2]
    res["view_create_us_wrapper"] = host_us_per_call(
        lambda: get_view(small), FLAGS.view_calls, FLAGS.view_batches
    )
    res["view_create_us_torch_ops"] = host_us_per_call(
        lambda: raw(small), FLAGS.view_calls, FLAGS.view_batches
    )
    res["view_create_us_strided"] = host_us_per_call(
        lambda: raw(sliced), FLAGS.view_calls, FLAGS.view_batches
    )
    # Reference point: the cheapest possible dispatcher round trip.
    res["torch_ops_noop_us"] = host_us_per_call(
        lambda: torch.ops.aten.alias.default(small), FLAGS.view_calls, FLAGS.view_batches
    )

    print(f"device: {res['device']}, buffer {FLAGS.mbytes} MiB")
    print(f"pinned H2D copy           : {res['h2d_copy_gbs']:8.1f} GB/s")
    print(
        f"GPU copy through UVA view : {res['view_copy_gbs']:8.1f} GB/s "
        f"({res['view_copy_pct_of_h2d']:.1f}% of H2D)"
    )
    print(
        f"GPU sum through UVA view  : {res['view_sum_gbs']:8.1f} GB/s "
        f"({res['view_sum_pct_of_h2d']:.1f}% of H2D)"
    )
    print(f"view creation (ops wrapper)   : {res['view_create_us_wrapper']:.2f} us/call")
    print(f"view creation (torch.ops)     : {res['view_create_us_torch_ops']:.2f} us/call")
    print(f"view creation (strided slice) : {res['view_create_us_strided']:.2f} us/call")
    print(f"aten.alias dispatch (baseline): {res['torch_ops_noop_us']:.2f} us/call")
    if FLAGS.json:
        with open(FLAGS.json, "w") as f:
            json.dump(res, f, indent=2)
        print(f"wrote {FLAGS.json}")
    return 0


if __name__ == "__main__":
    sys.exit(app.run(main))
