// The server's version and edition (read once per connection to gate syntax).
CALL dbms.components() YIELD versions, edition
RETURN versions[0] AS version, edition
