MATCH (l:Local) WHERE $global_id IS NULL OR l.global_id = $global_id
RETURN properties(l) AS p ORDER BY l.id
