"""Engines that run the offline stages: :mod:`.local` (this machine, the default) and :mod:`.dask`
(a Dask cluster). Both share every stage, constant and salt, and give the same clusters."""
