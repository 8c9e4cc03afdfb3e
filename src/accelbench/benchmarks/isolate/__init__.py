"""`isolate`: pairs of nodes and of local ranks, measured to name the slow node or link."""
