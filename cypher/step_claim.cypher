// Claim a step id inside the step's transaction. Returns fresh = false when the step was
// applied before: the caller then writes nothing (replays are no-ops). The uniqueness
// constraint on :Step(id) makes concurrent claims of one id serialize.
MERGE (s:Step {id: $id})
ON CREATE SET s.claimed = true
WITH s, coalesce(s.claimed, false) AS fresh
REMOVE s.claimed
RETURN fresh
