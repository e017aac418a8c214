"""`python -m binding_lens ...` is `binding-lens ...`; the form `torchrun` launches:

torchrun --nproc-per-node 4 -m binding_lens extract --model facebook/dinov2-large ... --out store
"""

import sys

from .cli import main

sys.exit(main())
