// A round trip that needs the database to exist: the connection check.
RETURN 1 AS ok
