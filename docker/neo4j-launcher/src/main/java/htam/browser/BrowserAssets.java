package htam.browser;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import javax.ws.rs.GET;
import javax.ws.rs.Path;
import javax.ws.rs.PathParam;
import javax.ws.rs.core.Context;
import javax.ws.rs.core.Response;
import javax.ws.rs.core.UriInfo;

/**
 * The HTG's Neo4j Browser assets (docker/browser, copied onto the classpath by Maven), served
 * by the server itself as an unmanaged extension mounted at /htam, so the Browser plays the
 * guide from its own server: {@code :play http://localhost:7474/htam/guide.html}.
 *
 * <p>favorites.cypher is the one source of the saved queries: the guide names them
 * ({@code {{query:NAME}}} becomes a runnable block) and favorites.zip packs one file per query,
 * as the Browser's Favorites import reads them. {@code {{base}}} in the guide becomes this
 * mount's address, so its style and favourites links lead back here.
 */
@Path("/")
public final class BrowserAssets {
    private static final String ROOT = "/htam/browser/";
    private static final Map<String, String> TYPES = Map.of(
            "guide.html", "text/html; charset=utf-8",
            "htam.grass", "text/plain; charset=utf-8",
            "favorites.cypher", "text/plain; charset=utf-8",
            "favorites.zip", "application/zip");
    private static final Pattern QUERY = Pattern.compile("\\{\\{query:([^}]+)}}");

    @GET
    @Path("{name}")
    public Response get(@PathParam("name") String name, @Context UriInfo uri) throws IOException {
        String type = TYPES.get(name);
        if (type == null) {
            return Response.status(Response.Status.NOT_FOUND).build();
        }
        byte[] body = switch (name) {
            case "guide.html" -> guide(base(uri)).getBytes(StandardCharsets.UTF_8);
            case "favorites.zip" -> zip(favorites());
            default -> read(name).getBytes(StandardCharsets.UTF_8);
        };
        // The Browser fetches guides and styles by XHR, from whichever host name it was opened at.
        return Response.ok(body, type).header("Access-Control-Allow-Origin", "*").build();
    }

    private static String base(UriInfo uri) {
        String base = uri.getBaseUri().toString();
        return base.endsWith("/") ? base.substring(0, base.length() - 1) : base;
    }

    private static String read(String name) throws IOException {
        try (InputStream in = BrowserAssets.class.getResourceAsStream(ROOT + name)) {
            if (in == null) {
                throw new IOException("missing Browser asset " + name);
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    private static String guide(String base) throws IOException {
        Map<String, String> queries = favorites();
        Matcher m = QUERY.matcher(read("guide.html").replace("{{base}}", base));
        StringBuilder out = new StringBuilder();
        while (m.find()) {
            String query = queries.get(m.group(1));
            if (query == null) {
                throw new IOException("guide.html names a query favorites.cypher lacks: " + m.group(1));
            }
            String block = "<pre class=\"pre-scrollable code runnable\">" + escape(query) + "</pre>";
            m.appendReplacement(out, Matcher.quoteReplacement(block));
        }
        m.appendTail(out);
        return out.toString();
    }

    /**
     * The saved queries by name, in file order: each ends with a semicolon, has no blank line
     * inside, and starts with a comment line that names it; text before a blank line is the file's.
     */
    private static Map<String, String> favorites() throws IOException {
        Map<String, String> queries = new LinkedHashMap<>();
        for (String chunk : read("favorites.cypher").split(";[ \\t]*(\\r?\\n|$)")) {
            String[] paragraphs = chunk.strip().split("\\r?\\n[ \\t]*\\r?\\n");
            String query = paragraphs[paragraphs.length - 1].strip();
            if (!query.isEmpty()) {
                queries.put(query.lines().findFirst().orElseThrow().replaceFirst("^//\\s*", ""), query);
            }
        }
        return queries;
    }

    private static byte[] zip(Map<String, String> queries) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (ZipOutputStream zip = new ZipOutputStream(bytes)) {
            for (Map.Entry<String, String> q : queries.entrySet()) {
                // A folder in the archive becomes a folder of favourites.
                zip.putNextEntry(new ZipEntry("HTAM/" + q.getKey().replaceAll("[^\\w ,.-]", "_") + ".cypher"));
                zip.write(q.getValue().getBytes(StandardCharsets.UTF_8));
                zip.closeEntry();
            }
        }
        return bytes.toByteArray();
    }

    private static String escape(String text) {
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
    }
}
