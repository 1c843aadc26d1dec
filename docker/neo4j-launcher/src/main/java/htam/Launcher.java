package htam;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.graphdb.QueryExecutionException;
import org.neo4j.server.CommunityBootstrapper;
import org.neo4j.server.NeoBootstrapper;

/**
 * Runs the Neo4j Community server (Bolt, HTTP, Browser) in this JVM with auth enabled.
 *
 * <p>Usage: {@code Launcher --home DIR [--password P] [--bolt-port 7687] [--http-port 7474]};
 * without --password it reads HTAM_NEO4J_PASSWORD, which keeps it out of `ps`. Data lives in
 * DIR/data and survives restarts. Prints {@code READY bolt://127.0.0.1:PORT} once the password
 * is set; SIGTERM stops the server through Neo4j's own shutdown hook.
 */
public final class Launcher {
    private static final String SAME_PASSWORD = "Old password and new password cannot be the same";

    private Launcher() {}

    public static void main(String[] argv) {
        Map<String, String> args = parse(argv);
        String home = require(args, "--home");
        args.putIfAbsent("--password", System.getenv("HTAM_NEO4J_PASSWORD"));
        String password = require(args, "--password");
        String boltPort = args.getOrDefault("--bolt-port", "7687");
        String httpPort = args.getOrDefault("--http-port", "7474");

        NeoBootstrapper server = new CommunityBootstrapper();
        int code = server.start(Path.of(home), settings(boltPort, httpPort));
        if (code != NeoBootstrapper.OK) {
            System.err.println("FAILED neo4j exited with code " + code + "; see " + home + "/logs");
            System.exit(code);
        }
        try {
            setPassword(server.getDatabaseManagementService(), password);
        } catch (RuntimeException e) {
            // Neo4j's threads would keep a half-configured server alive: exit, which stops it.
            System.err.println("FAILED could not set the password: " + e.getMessage());
            System.exit(1);
        }
        System.out.println("READY bolt://127.0.0.1:" + boltPort);
        System.out.flush();
        // Neo4j's non-daemon threads keep the JVM alive; its shutdown hook handles SIGTERM.
    }

    private static Map<String, String> settings(String boltPort, String httpPort) {
        Map<String, String> s = new HashMap<>();
        s.put("server.default_listen_address", "127.0.0.1");
        s.put("server.bolt.listen_address", "127.0.0.1:" + boltPort);
        // What the HTTP root tells clients (Neo4j Browser's connect form): otherwise port 7687.
        s.put("server.bolt.advertised_address", ":" + boltPort);
        s.put("server.http.listen_address", "127.0.0.1:" + httpPort);
        s.put("server.https.enabled", "false");
        s.put("dbms.security.auth_enabled", "true");
        // These machines are offline; the usage reporter would only wait on the network.
        s.put("dbms.usage_report.enabled", "false");
        // Neo4j Browser does not ask its user to send usage data.
        s.put("client.allow_telemetry", "false");
        // The HTG's Browser guide, style and saved queries (docker/browser) at /htam/, open without
        // a login like the Browser itself; the guide plays when the Browser connects.
        s.put("server.unmanaged_extension_classes", "htam.browser=/htam");
        s.put("dbms.security.http_auth_allowlist", "/,/browser.*,/htam/.*");
        s.put("browser.post_connect_cmd", "play http://localhost:" + httpPort + "/htam/guide.html");
        // The heap is capped by the JVM flags; keep the page cache small to match.
        s.put("server.memory.pagecache.size", "256m");
        // Bolt otherwise idles 2 x 5 s on shutdown, after the stores are already closed
        // (debug.log then warns that the wait was cut short: harmless).
        s.put("internal.server.bolt.connection_shutdown_wait_time", "1s");
        s.put("internal.server.bolt.thread_pool_shutdown_wait_time", "1s");
        return s;
    }

    /** The launcher owns the password: whatever it was, it becomes the one given. */
    private static void setPassword(DatabaseManagementService dbms, String password) {
        try {
            dbms.database("system").executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $p CHANGE NOT REQUIRED", Map.of("p", password));
        } catch (QueryExecutionException e) {
            // Neo4j refuses to "change" a password to itself: then it is already right.
            if (!e.getMessage().contains(SAME_PASSWORD)) {
                throw e;
            }
        }
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i], argv[i + 1]);
        }
        return args;
    }

    private static String require(Map<String, String> args, String name) {
        String value = args.get(name);
        if (value == null) {
            System.err.println("FAILED missing " + name + " (usage: --home DIR --password P"
                    + " (or HTAM_NEO4J_PASSWORD) [--bolt-port 7687] [--http-port 7474])");
            System.exit(2);
        }
        return value;
    }
}
