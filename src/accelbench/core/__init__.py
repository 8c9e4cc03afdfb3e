"""The measuring core: parameters, benchmark declarations, case identity, timing, statistics."""
