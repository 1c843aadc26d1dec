// One run's steps in order. An unknown run gives no row; a run without steps one row of
// nulls (its OPTIONAL MATCH found nothing).
MATCH (r:Run {id: $run_id})
OPTIONAL MATCH (r)-[:HAS_STEP]->(s:Step)
RETURN s.index AS index, s.global_id AS global_id, s.local_id AS local_id, s.verdict AS verdict,
       s.speedup AS speedup, s.reward AS reward, s.best_before AS best_before,
       s.best_after AS best_after, s.base_before AS base_before, s.created_at AS created_at
ORDER BY index
