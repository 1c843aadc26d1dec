MATCH (s:Step) WHERE $run_id IS NULL OR s.run_id = $run_id
RETURN properties(s) AS p ORDER BY s.run_id, s.index, s.id
