"""The wind tunnel on a virtual clock: a discrete-event simulator over EngineCores, and its experiments."""

from infermeter.sim.run import simulate_run, write_sim_run
from infermeter.sim.simulator import SimOutcome, SimTask, simulate, simulate_task

__all__ = ["SimOutcome", "SimTask", "simulate", "simulate_run", "simulate_task", "write_sim_run"]
