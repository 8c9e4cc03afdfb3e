"""Going on with a stored run (`accelbench run --resume RUN`): which of its cases are done,
and which the resumed run measures.

A resume is data given to the one run lifecycle (`session.conduct`), not a second one:
the request is the run's own (its stored command line), the cases are planned as they
were, and those not done are measured and added to the same run.

A case is done, and kept, when the run's result for it (its newest measurement) is

- ok, and measured in every process planned (a case cut short by Ctrl-C or SIGTERM, in
  fewer processes, is measured again), or
- skipped: a skip says that the case does not apply to this device and stack (a dtype
  the device lacks, a package that is not installed, ranks the node cannot hold), and
  the stack is the run's own, as checked before anything runs.

A failed case, and a case the run never reached, is measured. Nothing stored is changed:
the new measurement of a case is added beside the earlier one, which the run keeps as
superseded (`StoredRun.superseded`).

A resume runs only on the stack the run was measured on: the same stack fingerprint
(`Fingerprint.fingerprint_id`: device, driver, libraries, packages, environment, host
and accelbench), or its figures would mix two stacks in one run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelbench.core.names import RUN_COMPLETE, STATUS_OK, STATUS_SKIPPED
from accelbench.errors import EXIT_DEVICE, UserError

if TYPE_CHECKING:
    from accelbench.core.measurement import Measurement
    from accelbench.env.fingerprint import Fingerprint
    from accelbench.runner.plan import PlannedCase
    from accelbench.store import StoredRun

# The warning that ends the record of a case cut short by Ctrl-C or SIGTERM, measured in
# fewer processes than planned (`rounds.Rounds.record_partial`): measured again.
CUT_SHORT = "interrupted after"

# The stack differs from the run's: the device and stack it was measured on are not
# the ones here, as for a device that is not available.
EXIT_OTHER_STACK = EXIT_DEVICE


def is_done(m: Measurement) -> bool:
    """Whether a case with this result is kept by a resume (see the module docstring)."""
    if m.status == STATUS_SKIPPED:
        return True
    return m.status == STATUS_OK and not any(w.startswith(CUT_SHORT) for w in m.warnings)


@dataclass(frozen=True)
class Resume:
    """A stored run to go on with, as it was read when the resume began."""

    run: StoredRun

    @property
    def run_id(self) -> str:
        return self.run.record.id

    @property
    def kept(self) -> tuple[Measurement, ...]:
        """The run's results that are done, in the order they were stored."""
        return tuple(m for m in self.run.measurements if is_done(m))

    @property
    def earlier(self) -> tuple[Measurement, ...]:
        """Every stored measurement that is not kept: superseded already, or a result
        that the resume measures again."""
        return (*self.run.superseded, *(m for m in self.run.measurements if not is_done(m)))

    @property
    def complete(self) -> bool:
        """The run finished with every case done: nothing to resume."""
        return self.run.record.status == RUN_COMPLETE and len(self.kept) == len(
            self.run.measurements)

    def check_stack(self, fingerprint: Fingerprint) -> None:
        """Refuse a stack other than the run's (module docstring), saying what differs."""
        record = self.run.record
        if fingerprint.fingerprint_id == record.fingerprint_id:
            return
        here = fingerprint.to_dict()
        differ = sorted(k for k in {*here, *self.run.fingerprint}
                        if here.get(k) != self.run.fingerprint.get(k))
        what = (f"{record.generation_key!r}, not {fingerprint.generation_key!r}"
                if record.generation_key != fingerprint.generation_key
                else f"another stack ({', '.join(differ) or 'fingerprint'} differ)")
        raise UserError(f"run {record.id} was measured on {what}: a run resumes only on the "
                        f"stack it was measured on (fingerprint {record.fingerprint_id}, here "
                        f"{fingerprint.fingerprint_id})", EXIT_OTHER_STACK)

    def pending(self, cases: Sequence[PlannedCase]) -> list[PlannedCase]:
        """The planned cases to measure: those not done, in plan order."""
        done = {m.case.key for m in self.kept}
        return [c for c in cases if c.case.key not in done]
