// Claim a step id inside the step's transaction. fresh = false when the id was applied
// before: then `stored` holds that step's properties, which the caller compares with the
// replayed step (same payload: a no-op; another: an error). The uniqueness constraint
// on :Step(id) makes concurrent claims of one id serialize.
MERGE (s:Step {id: $id})
ON CREATE SET s.claimed = true
WITH s, coalesce(s.claimed, false) AS fresh
REMOVE s.claimed
RETURN fresh, CASE WHEN fresh THEN null ELSE properties(s) END AS stored
