"""Whose turn it is to warm up.  With numpy and pandas loaded, a Python
spare's warm-up (python_call.warm_up) takes 145-185 ms in gVisor, most
of it copy-on-write faults (about 1,800, some 80 us each on a nested
machine).  Two spares warming at once, or one beside a call, share the
two cores with that call: calls 0.25 s apart found neither spare warm
and ran beside both.  So:

- the gate: a pipe that holds one byte while no call runs.  PID 1 takes
  the byte when a call's request comes and puts it back once the call
  has answered; a spare warms up only while it is there, and waits
  between its steps while it is not;
- the token: one byte that circulates among the spares in another pipe.
  A spare warms up only while it holds it, so one at a time: the first
  forked is warm before the second begins, instead of both half way.

Spares only ever look at the gate (select), never read it.  A spare
killed while it holds the token takes it along: PID 1 puts a new one in
once no Python spare is left (reissue), and a spare that waited
TOKEN_WAIT seconds for it warms up without it, so a lost token costs
time, never a warm-up.  Every descriptor here is closed in a call's
process (limits.enter_call), so code never sees them.
"""

import os
import select
import time

TOKEN_WAIT = 2.0  # seconds a spare waits for the token before it warms up without


class Turns:
    def __init__(self):
        self.gate_r, self.gate_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self.token_r, self.token_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        os.write(self.gate_w, b"g")
        os.write(self.token_w, b"t")
        self.open = True  # PID 1's view: the byte is in the gate
        self.held = False  # in a spare: whether it holds the token

    # ---- PID 1

    def close_gate(self):
        """A call's request came: spares stop warming up."""
        if self.open:
            try:
                os.read(self.gate_r, 1)
            except BlockingIOError:
                pass
            self.open = False

    def open_gate(self):
        """The call has answered (and the next spares are forked)."""
        if not self.open:
            os.write(self.gate_w, b"g")
            self.open = True

    def reissue(self):
        """No Python spare is left: exactly one token again, whatever a
        killed spare took along."""
        try:
            while os.read(self.token_r, 16):
                pass
        except BlockingIOError:
            pass
        os.write(self.token_w, b"t")

    # ---- in a spare

    def take(self, req_r, since):
        """Wait until this spare may warm up: the gate open and the token
        held (after TOKEN_WAIT seconds from since, the gate alone).
        Whether it may (False: its request came first).  Returns holding
        the token, or not (self.held says which)."""
        self.held = False
        while True:
            if select.select([req_r, self.gate_r], [], [])[0] != [self.gate_r]:
                return False
            left = since + TOKEN_WAIT - time.monotonic()
            if left <= 0:
                return True
            ready = select.select([req_r, self.token_r], [], [], left)[0]
            if req_r in ready:
                return False
            if not ready:
                continue  # waited long enough: the gate alone
            try:
                self.held = bool(os.read(self.token_r, 1))
            except BlockingIOError:
                continue  # another spare took it
            if self.gate_open():
                return True
            self.give_back()  # a call came meanwhile: wait for the gate again

    def gate_open(self):
        return bool(select.select([self.gate_r], [], [], 0)[0])

    def give_back(self):
        if self.held:
            self.held = False
            os.write(self.token_w, b"t")
