// Every step that chose the global $global_id, oldest first: when, in which run, and its reward.
MATCH (s:Step)-[:CHOSE_GLOBAL]->(:Global {id: $global_id})
RETURN s.created_at AS created_at, s.run_id AS run_id, s.index AS index, s.reward AS reward
ORDER BY created_at, run_id, index
