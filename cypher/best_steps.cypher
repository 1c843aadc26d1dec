// The flat baseline's retrieval: up to $limit steps of runs other than $exclude_run, those
// of $task_id first, then the highest reward, then (run, index, id) order, as
// MemoryStore.best_steps says. Ranked on the server: only $limit steps cross the wire.
MATCH (s:Step)
WHERE s.run_id <> $exclude_run
RETURN properties(s) AS p
ORDER BY CASE WHEN s.task_id = $task_id THEN 0 ELSE 1 END, s.reward DESC, s.run_id, s.index, s.id
LIMIT $limit
