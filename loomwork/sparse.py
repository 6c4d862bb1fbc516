"""`loomwork.sparse`: block sparse row matrices (`BsrMatrix`, `bsr_zeros`, `bsr_from_triplets`, `bsr_mv`, ...)
under Warp's module name (`import warp.sparse`); see loomwork.autodiff.sparse."""

from loomwork.autodiff.sparse import (
    BsrMatrix,
    bsr_block_index,
    bsr_copy,
    bsr_from_triplets,
    bsr_get_diag,
    bsr_identity,
    bsr_mv,
    bsr_row_index,
    bsr_set_from_triplets,
    bsr_set_zero,
    bsr_zeros,
)

__all__ = ["BsrMatrix", "bsr_block_index", "bsr_copy", "bsr_from_triplets", "bsr_get_diag", "bsr_identity", "bsr_mv",
           "bsr_row_index", "bsr_set_from_triplets", "bsr_set_zero", "bsr_zeros"]
