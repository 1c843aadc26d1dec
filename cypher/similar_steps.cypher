// The flat baseline's retrieval (docs/method.md, "flat"): up to $limit steps of runs other
// than $exclude_run, each with its similarity weight w, the highest first, then (run, index,
// id) order, as MemoryStore.similar_steps says. $weights: same task and same parent kernel,
// same task, same operator family (the step's task's `family`), any other step. Ranked on
// the server: only $limit steps cross the wire.
MATCH (s:Step)
WHERE s.run_id <> $exclude_run
OPTIONAL MATCH (t:Task {id: s.task_id})
WITH s, CASE
  WHEN s.task_id = $task_id AND $parent_sha256 IS NOT NULL AND s.parent_sha256 = $parent_sha256 THEN $weights[0]
  WHEN s.task_id = $task_id THEN $weights[1]
  WHEN $family IS NOT NULL AND t.family = $family THEN $weights[2]
  ELSE $weights[3]
END AS w
RETURN properties(s) AS p, w
ORDER BY w DESC, s.run_id, s.index, s.id
LIMIT $limit
