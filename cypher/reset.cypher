// Delete the whole memory in bounded transactions of $batch rows: steps first, each with
// its few relationships, so that no transaction detaches a :Global or :Local holding a
// relationship per recorded step. The last statement clears this reset's mark ($token);
// run one statement at a time, in this order.
MATCH (n:Step) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF $batch ROWS;
MATCH (n:Run) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF $batch ROWS;
MATCH (n:Task) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF $batch ROWS;
MATCH (n:Local) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF $batch ROWS;
MATCH (n:Global) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF $batch ROWS;
MATCH (m:MemoryState {id: 'memory'}) WHERE m.token = $token DELETE m
