// One page of :Run records in id order, after the id $after (the unique index serves the order).
MATCH (r:Run) WHERE r.id > $after
RETURN properties(r) AS p ORDER BY r.id LIMIT $limit
