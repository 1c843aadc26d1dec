// One page of :Task records in id order, after the id $after (the unique index serves the order).
MATCH (t:Task) WHERE t.id > $after
RETURN properties(t) AS p ORDER BY t.id LIMIT $limit
