// Delete the whole memory (HTG and run records), in batches so large graphs fit in memory.
MATCH (n) WHERE n:Global OR n:Local OR n:Task OR n:Run OR n:Step
CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS
