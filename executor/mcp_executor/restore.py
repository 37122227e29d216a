"""After a restore from a checkpoint (sandbox/hibernate.h, frame W): the
sandbox is the one that hibernated, memory and all, so whatever is random
in it is the image's.  The supervisor removes an image once it was
restored, but what this executor forked before the checkpoint would still
start from the image's random state: the spares (each becomes the next
call's process, and forks nothing new before the call) and the warm
Node.js.  They are replaced by new ones, forked after the executor's own
generators took the host's fresh seed; then Y says the executor is ready
again, naming the persistent interpreters that live on (the supervisor
that restored the sandbox is a new process, and learns it here).

The persistent interpreters (persistent.py) are not reseeded: they go on
as if the sandbox had never slept, and a cell that seeded its generator
gets the sequence it asked for.  Each image is restored once at most.

What a restore cannot change: the hash seed and the address layout of the
executor's interpreter, which every call's process inherits anyway, and
which are as random as they were at the sandbox's first start.
"""

import hashlib
import json
import os
import random
import sys

from .protocol import HIBERNATE, write_frame, write_ready
from .spare import drop_spares, prepare_spare


def before_checkpoint(st):
    """H: a checkpoint follows.  The spares would only be replaced at the
    wake: they go now, and with them the pages they copied (the image is
    smaller, written and restored sooner)."""
    drop_spares(st)
    write_frame(HIBERNATE, b"")


def fresh_seed(payload):
    """The host's seed from the W frame, mixed with the sandbox's own."""
    try:
        host = bytes.fromhex(json.loads(payload).get("seed", ""))
    except (ValueError, AttributeError, TypeError):
        host = b""
    return hashlib.sha256(host + os.urandom(32)).digest()


def wake(st, payload):
    """Reseed, replace the spares, say Y."""
    seed = fresh_seed(payload)
    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            np.random.seed(np.frombuffer(seed, dtype=np.uint32))
        except Exception:
            pass
    drop_spares(st)
    prepare_spare(st)
    write_ready(st.preloaded, restored=True,
                interpreters=sorted(lang for lang, i in st.interpreters.items() if i.alive))
