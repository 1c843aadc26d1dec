"""The referee: reference outputs and timings, comparisons and verdicts, in a process that
never imports candidate code (docs/judge.md)."""
