"""The exponent unit's rate by operand type on an NVIDIA GPU: ex2.approx on f32, on packed bf16x2
and on packed f16x2 (PTX ISA: bf16x2 needs sm_90, f16x2 sm_75), each a chain y <- 2^-y per
value (bounded in [0.5, 1]), many chains per SM.  Prints values exponentiated per second for
each; a packed form helps the softmax kinds' weights only if it beats f32's value rate.
Runs through Triton's inline assembly (the GPU host's PyTorch + Triton).
    python3 bench/probes/ex2_rate.py"""
import torch
import triton
import triton.language as tl

# one kernel a type: Triton takes the assembly's result dtype as a literal, not as a constexpr
# parameter (a single kernel with the type as a parameter did not compile on the GPU host)
@triton.jit
def chain_f32(X, Y, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    y = tl.load(X + offs)
    for _ in range(ITERS):
        y = tl.inline_asm_elementwise("{.reg .f32 t; neg.f32 t, $1; ex2.approx.ftz.f32 $0, t;}", "=f,f", [y],
                                      dtype=tl.float32, is_pure=True, pack=1)
    tl.store(Y + offs, y)


@triton.jit
def chain_bf16x2(X, Y, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    y = tl.load(X + offs)
    for _ in range(ITERS):
        y = tl.inline_asm_elementwise("{.reg .b32 t; xor.b32 t, $1, 0x80008000; ex2.approx.ftz.bf16x2 $0, t;}",
                                      "=r,r", [y], dtype=tl.bfloat16, is_pure=True, pack=2)
    tl.store(Y + offs, y)


@triton.jit
def chain_f16x2(X, Y, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    y = tl.load(X + offs)
    for _ in range(ITERS):
        y = tl.inline_asm_elementwise("{.reg .b32 t; xor.b32 t, $1, 0x80008000; ex2.approx.f16x2 $0, t;}",
                                      "=r,r", [y], dtype=tl.float16, is_pure=True, pack=2)
    tl.store(Y + offs, y)


KERNELS = {"f32": (chain_f32, torch.float32), "bf16x2": (chain_bf16x2, torch.bfloat16),
           "f16x2": (chain_f16x2, torch.float16)}


def main():
    n, iters, block = 132 * 2048 * 8, 4096, 1024
    print(torch.cuda.get_device_name())
    for name, (kern, dt) in KERNELS.items():
        args = dict(ITERS=iters, BLOCK=block)
        x = torch.rand(n, device="cuda").to(dt) * 0.5 + 0.5
        y = torch.empty_like(x)
        grid = (n // block,)
        ck = kern[grid](x, y, **args)
        torch.cuda.synchronize()
        try:  # the exponent instructions as the GPU runs them
            mufu = [l.strip() for l in ck.asm["sass"].splitlines() if "MUFU" in l]
            print("  ", name, len(mufu), "MUFU in the program, e.g.", mufu[:1])
        except Exception as err:  # no disassembler: the rates alone
            print("  ", name, "no SASS:", err)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(5):
            kern[grid](x, y, **args)
        e.record()
        torch.cuda.synchronize()
        ms = s.elapsed_time(e) / 5
        ok = bool(torch.isfinite(y.float()).all()) and 0.4 < float(y.float().mean()) < 1.0
        print("%-7s %8.3f ms  %7.1f G values/s  (mean %.4f, %s)" % (name, ms, n * iters / ms / 1e6,
                                                                    float(y.float().mean()), "ok" if ok else "BAD"))


if __name__ == "__main__":
    main()
