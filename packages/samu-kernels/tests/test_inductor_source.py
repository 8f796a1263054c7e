"""The kernels' source as ``torch.compile`` copies it: Inductor writes every kernel that a
custom op hands to ``wrap_triton``, with the ``@triton.jit`` functions and constants it
reaches, into a ``'''...'''`` literal of its generated module, and up to torch 2.11 it does
so without escaping backslashes. A ``\\n`` in that source (a multi-line inline-assembly
string, say) then becomes a line break inside a string literal, and compiling any block
that uses the kernel fails with "unterminated string literal" (2026-12-07, torch 2.11 on an
H100, ``forward_split_kernel``). Checked on CPU in a fresh process: the kernels must be
Triton's compiled functions, not the interpreter's."""

from __future__ import annotations

from fresh_process import python_in_fresh_process

PROBE = """
import ast, importlib, pkgutil
import samu_kernels
from torch._inductor.codegen.wrapper import (
    user_defined_triton_kernel_transitive_closure_source_code as inductor_source,
)
from triton.runtime.jit import JITFunction

kernels = {}
for info in pkgutil.walk_packages(samu_kernels.__path__, "samu_kernels."):
    if info.name.endswith(".__main__"):
        continue
    for name, value in vars(importlib.import_module(info.name)).items():
        if isinstance(value, JITFunction) and name.endswith("_kernel"):
            kernels[value.fn.__module__ + "." + name] = value
print(len(kernels))
for name, kernel in sorted(kernels.items()):
    source = inductor_source(kernel)
    if ast.literal_eval("'''" + source + "'''") != source:
        print("changed:", name)
"""


def test_every_kernel_survives_inductors_unescaped_copy() -> None:
    result = python_in_fresh_process(PROBE)
    assert result.returncode == 0, result.stderr[-2000:]
    count, *changed = result.stdout.splitlines()
    assert int(count) >= 18  # the scans' kernels and the block's rmsnorm and gated GELU
    assert not changed, "kernel source with backslashes (write PTX on one line): " + str(changed)
