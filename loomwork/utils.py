"""`loomwork.utils`: library routines on arrays, under Warp's module name."""

from loomwork.kernels.timing import ScopedTimer  # noqa: F401 - here too, as in earlier Warp versions
from loomwork.kernels.utils import (  # noqa: F401
    array_cast,
    array_inner,
    array_scan,
    array_sum,
    radix_sort_pairs,
    runlength_encode,
    segmented_sort_pairs,
)
