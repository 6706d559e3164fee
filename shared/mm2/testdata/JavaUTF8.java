// JavaUTF8 prints, for each line of hex on stdin, the hex of the UTF-8 encoding of
// new String(bytes, UTF_8): what Java (Kafka's protocol reader, Connect) makes of those bytes.
// Run by shared/mm2's TestJavaUTF8Oracle: java testdata/JavaUTF8.java < lines
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

public class JavaUTF8 {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintWriter out = new PrintWriter(new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII)));
        HexFormat hex = HexFormat.of();
        for (String line; (line = in.readLine()) != null; ) {
            String s = new String(hex.parseHex(line), StandardCharsets.UTF_8);
            out.println(hex.formatHex(s.getBytes(StandardCharsets.UTF_8)));
        }
        out.flush();
    }
}
