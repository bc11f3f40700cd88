"""Shared by ptx_attention.py and ptx_gemm.py: running a kernel from the PTX that NVIDIA's
OpenCL compiler produced through the CUDA driver API."""
import re, sys

from cuda.bindings import driver as cu


def check(res):
    err, *rest = res if isinstance(res, tuple) else (res,)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError("CUDA driver: %s" % err)
    return rest[0] if len(rest) == 1 else rest


def opt(opts, name, default=None):
    """The value of -DNAME=int in a build option string."""
    m = re.search(r"-D%s=(-?\d+)" % name, opts)
    return int(m.group(1)) if m else default


def load_kernel(path, entry):
    """(function, PTX text) of `entry`.  NVIDIA's OpenCL reads implicit values from environment
    registers: the work-group and global offsets (%envreg0..5, 0 here: no global offset) and,
    for get_num_groups, the group counts (%envreg6..8); under the CUDA driver those are the
    grid's own (%nctaid)."""
    text = open(path).read()
    text = re.sub(r"%envreg[0-5];", "0;", text)
    for i, axis in ((6, "x"), (7, "y"), (8, "z")):
        text = re.sub(r"mov\.b32(\s+%r\d+), %envreg" + str(i) + ";", r"mov.u32\1, %nctaid." + axis + ";", text)
    if "%envreg" in text:
        sys.exit("the PTX reads an environment register this harness does not map")
    mod = check(cu.cuModuleLoadData(text.encode() + b"\0"))
    return check(cu.cuModuleGetFunction(mod, entry.encode())), text


def launch_median_ms(fn, text, entry, args, grid, block, reps):
    """Launches fn(args) reps times on torch's stream; the median time in ms (CUDA events).
    args: ctypes values in the order of the PTX entry's parameters (their count is checked)."""
    import ctypes
    import torch
    head = text[text.index(".entry " + entry):]
    nparams = head[:head.index(")")].count(".param")
    if nparams != len(args):
        sys.exit("the PTX entry has %d parameters, this harness passes %d" % (nparams, len(args)))
    params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(x) for x in args])
    stream = torch.cuda.current_stream().cuda_stream
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        check(cu.cuLaunchKernel(fn, *grid, block, 1, 1, 0, stream, ctypes.addressof(params), 0))
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    return sorted(times)[len(times) // 2]
