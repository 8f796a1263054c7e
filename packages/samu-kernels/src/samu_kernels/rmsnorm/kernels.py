"""Triton kernels of RMSNorm and residual add + RMSNorm, forward and backward.

Rows are contiguous: ``[N, D]`` with row stride ``D``. A program holds a
``[BLOCK_ROWS, BLOCK_COLS]`` tile with the whole row (``BLOCK_COLS >= D``), so each row is
read once per pass. Arithmetic is float32 whatever the storage dtype.
"""

import triton
import triton.language as tl


@triton.jit
def rms_norm_forward_kernel(
    x_ptr,
    residual_ptr,
    scale_ptr,
    y_ptr,
    sum_ptr,
    rstd_ptr,
    n_rows,
    n_cols,
    eps,
    HAS_RESIDUAL: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    """y = s * rstd * (1 + scale); s = x (+ residual, stored); rstd = rsqrt(mean(s^2) + eps)."""
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_COLS)
    row_mask = rows < n_rows
    col_mask = cols < n_cols
    mask = row_mask[:, None] & col_mask[None, :]
    offsets = rows[:, None].to(tl.int64) * n_cols + cols[None, :]

    s = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        s += tl.load(residual_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        tl.store(sum_ptr + offsets, s, mask=mask)
    rstd = tl.rsqrt(tl.sum(s * s, axis=1) / n_cols + eps)
    tl.store(rstd_ptr + rows, rstd, mask=row_mask)

    gain = 1.0 + tl.load(scale_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    y = s * rstd[:, None] * gain[None, :]
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rms_norm_backward_kernel(
    dy_ptr,
    dsum_ptr,
    x_ptr,
    scale_ptr,
    rstd_ptr,
    dx_ptr,
    dresidual_ptr,
    dscale_partial_ptr,
    n_rows,
    n_cols,
    rows_per_program,
    HAS_DSUM: tl.constexpr,
    HAS_DRESIDUAL: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    """Gradients of y = x * rstd * (1 + scale) from the saved x and rstd (x_hat recomputed).

    Program p owns rows [p * rows_per_program, (p + 1) * rows_per_program) and walks them in
    tiles of BLOCK_ROWS. dx = rstd * (g - x_hat * mean(g * x_hat)) with g = dy * (1 + scale),
    plus the incoming gradient of the sum (HAS_DSUM); it is stored to dx and, for the residual
    add, to dresidual as well. The program's partial scale gradient sum(dy * x_hat) over its
    rows goes to row p of dscale_partial ([n_programs, n_cols]), reduced later on the host.
    """
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_COLS)
    col_mask = cols < n_cols
    gain = 1.0 + tl.load(scale_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dscale = tl.zeros([BLOCK_COLS], dtype=tl.float32)

    row_begin = pid * rows_per_program
    row_end = tl.minimum(row_begin + rows_per_program, n_rows)
    for tile_begin in range(row_begin, row_end, BLOCK_ROWS):
        rows = tile_begin + tl.arange(0, BLOCK_ROWS)
        row_mask = rows < row_end
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows[:, None].to(tl.int64) * n_cols + cols[None, :]

        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        x_hat = x * rstd[:, None]
        dscale += tl.sum(dy * x_hat, axis=0)

        g = dy * gain[None, :]
        projection = tl.sum(g * x_hat, axis=1) / n_cols
        dx = (g - x_hat * projection[:, None]) * rstd[:, None]
        if HAS_DSUM:
            dx += tl.load(dsum_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        if HAS_DRESIDUAL:
            tl.store(dresidual_ptr + offsets, dx.to(dresidual_ptr.dtype.element_ty), mask=mask)

    tl.store(dscale_partial_ptr + pid * n_cols + cols, dscale, mask=col_mask)
