"""The candidate's side of the judge: what runs in a candidate's own process (docs/judge.md)."""
