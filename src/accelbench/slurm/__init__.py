"""Slurm: the sbatch scripts `accelbench slurm` submits, the Slurm commands it runs to
check a request and read job state (behind one seam, `commands.Slurm`), and the loop
that waits for jobs to end. Slurm schedules; accelbench only writes jobs and reads
their state."""
