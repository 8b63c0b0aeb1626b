import java.math.BigDecimal;
import java.sql.BatchUpdateException;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.util.ArrayList;
import java.util.List;

/**
 * Drives pgjdbc against a server and prints one line per check: {@code name<TAB>OK<TAB>result}
 * or {@code name<TAB>ERR<TAB>sqlstate<TAB>message}. The Python test asserts on the results; one
 * JVM run covers every check. Usage: {@code java JdbcCheck <jdbc url> <user>}.
 */
public final class JdbcCheck {
    interface Check {
        String run(Connection conn) throws Exception;
    }

    private static void check(Connection conn, String name, Check body) {
        String line;
        try {
            line = name + "\tOK\t" + body.run(conn);
        } catch (SQLException e) {
            SQLException cause = e;
            if (e instanceof BatchUpdateException && e.getNextException() != null) {
                cause = e.getNextException();
            }
            line = name + "\tERR\t" + cause.getSQLState() + "\t" + oneLine(cause.getMessage());
            resetAfterError(conn);
        } catch (Exception e) {
            line = name + "\tERR\t-\t" + oneLine(e.toString());
            resetAfterError(conn);
        }
        System.out.println(line);
        System.out.flush();
    }

    private static void resetAfterError(Connection conn) {
        try {
            if (!conn.getAutoCommit()) {
                conn.rollback();
                conn.setAutoCommit(true);
            }
        } catch (SQLException ignored) {
            // the next check reports whatever is wrong with the connection
        }
    }

    private static String oneLine(String s) {
        return s == null ? "" : s.replace('\n', ' ').replace('\t', ' ');
    }

    private static String rowText(ResultSet rs) throws SQLException {
        ResultSetMetaData md = rs.getMetaData();
        List<String> parts = new ArrayList<>();
        for (int i = 1; i <= md.getColumnCount(); i++) {
            Object v = rs.getObject(i);
            parts.add(v == null ? "NULL" : v.toString());
        }
        return String.join("|", parts);
    }

    public static void main(String[] args) throws Exception {
        try (Connection conn = DriverManager.getConnection(args[0], args[1], "")) {
            run(conn);
        }
    }

    private static void run(Connection conn) {
        check(conn, "connect", c -> c.getMetaData().getDatabaseProductName() + " "
                + c.getMetaData().getDatabaseMajorVersion());

        check(conn, "create", c -> {
            try (Statement st = c.createStatement()) {
                st.execute("CREATE TABLE jt (id int PRIMARY KEY, name varchar(40), "
                        + "amount numeric(12,2), at timestamp, flag boolean, note text)");
                st.execute("CREATE TABLE jf (n int PRIMARY KEY, label text)");
                return "done";
            }
        });

        check(conn, "literal_columns", c -> {
            try (Statement st = c.createStatement();
                    ResultSet rs = st.executeQuery("SELECT 1 AS one, 'two' AS two, NULL AS three")) {
                rs.next();
                return rowText(rs);
            }
        });

        check(conn, "prepared_insert", c -> {
            int total = 0;
            try (PreparedStatement ps = c.prepareStatement(
                    "INSERT INTO jt (id, name, amount, at, flag, note) VALUES (?, ?, ?, ?, ?, ?)")) {
                for (int i = 1; i <= 8; i++) {
                    ps.setInt(1, i);
                    ps.setString(2, "name" + i);
                    ps.setBigDecimal(3, new BigDecimal(i + ".25"));
                    ps.setTimestamp(4, Timestamp.valueOf("2024-01-0" + i + " 10:11:12.5"));
                    ps.setBoolean(5, i % 2 == 0);
                    ps.setNull(6, Types.VARCHAR);
                    total += ps.executeUpdate();
                }
            }
            return Integer.toString(total);
        });

        check(conn, "prepared_select", c -> {
            List<String> rows = new ArrayList<>();
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT id, name, amount, at, flag, note FROM jt WHERE id = ?")) {
                for (int i = 1; i <= 8; i++) {  // prepareThreshold=5: named, then binary results
                    ps.setInt(1, i);
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        rows.add(rowText(rs));
                    }
                }
            }
            return String.join(";", rows);
        });

        check(conn, "execute_query", c -> {
            try (Statement st = c.createStatement();
                    ResultSet rs = st.executeQuery("SELECT id, name FROM jt WHERE id < 4 ORDER BY id")) {
                List<String> rows = new ArrayList<>();
                while (rs.next()) {
                    rows.add(rowText(rs));
                }
                return String.join(";", rows);
            }
        });

        check(conn, "prepared_filters", c -> {
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT count(*) FROM jt WHERE name LIKE ? AND amount > ? AND flag = ?")) {
                ps.setString(1, "name%");
                ps.setBigDecimal(2, new BigDecimal("3"));
                ps.setBoolean(3, true);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    return Long.toString(rs.getLong(1));
                }
            }
        });

        check(conn, "batch", c -> {
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO jf (n, label) VALUES (?, ?)")) {
                for (int i = 1; i <= 100; i++) {
                    ps.setInt(1, i);
                    ps.setString(2, "row" + i);
                    ps.addBatch();
                }
                int[] counts = ps.executeBatch();
                int sum = 0;
                for (int n : counts) {
                    sum += n;
                }
                return counts.length + " " + sum;
            }
        });

        check(conn, "transaction", c -> {
            c.setAutoCommit(false);
            try (Statement st = c.createStatement()) {
                st.executeUpdate("INSERT INTO jt (id, name) VALUES (200, 'kept')");
                c.commit();
                st.executeUpdate("INSERT INTO jt (id, name) VALUES (201, 'dropped')");
                c.rollback();
            }
            c.setAutoCommit(true);
            try (Statement st = c.createStatement();
                    ResultSet rs = st.executeQuery("SELECT id FROM jt WHERE id >= 200 ORDER BY id")) {
                List<String> ids = new ArrayList<>();
                while (rs.next()) {
                    ids.add(rs.getString(1));
                }
                return String.join(",", ids);
            }
        });

        check(conn, "fetch_size", c -> {
            c.setAutoCommit(false);
            long count = 0;
            long sum = 0;
            try (PreparedStatement ps = c.prepareStatement("SELECT n, label FROM jf ORDER BY n")) {
                ps.setFetchSize(10);
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        count++;
                        sum += rs.getInt(1);
                    }
                }
            }
            c.commit();
            c.setAutoCommit(true);
            return count + " " + sum;
        });

        check(conn, "result_metadata", c -> {
            try (Statement st = c.createStatement();
                    ResultSet rs = st.executeQuery("SELECT id, name, amount, at, flag FROM jt WHERE id = 1")) {
                ResultSetMetaData md = rs.getMetaData();
                List<String> cols = new ArrayList<>();
                for (int i = 1; i <= md.getColumnCount(); i++) {
                    cols.add(md.getColumnName(i) + ":" + md.getColumnTypeName(i) + ":"
                            + md.getColumnType(i));
                }
                cols.add("scale=" + md.getScale(3) + ",precision=" + md.getPrecision(3));
                return String.join(",", cols);
            }
        });

        check(conn, "unique_violation", c -> {
            try (Statement st = c.createStatement()) {
                st.executeUpdate("INSERT INTO jt (id, name) VALUES (1, 'dup')");
                return "no error";
            }
        });

        check(conn, "usable_after_error", c -> {
            try (Statement st = c.createStatement();
                    ResultSet rs = st.executeQuery("SELECT count(*) FROM jt")) {
                rs.next();
                return Long.toString(rs.getLong(1));
            }
        });

        check(conn, "get_tables", c -> {
            DatabaseMetaData md = c.getMetaData();
            List<String> names = new ArrayList<>();
            try (ResultSet rs = md.getTables(null, "public", "j%", new String[] {"TABLE"})) {
                while (rs.next()) {
                    names.add(rs.getString("TABLE_NAME") + ":" + rs.getString("TABLE_TYPE"));
                }
            }
            return String.join(",", names);
        });

        check(conn, "get_columns", c -> {
            DatabaseMetaData md = c.getMetaData();
            List<String> cols = new ArrayList<>();
            try (ResultSet rs = md.getColumns(null, "public", "jt", null)) {
                while (rs.next()) {
                    cols.add(rs.getString("COLUMN_NAME") + ":" + rs.getString("TYPE_NAME") + ":"
                            + rs.getInt("DATA_TYPE") + ":" + rs.getString("IS_NULLABLE"));
                }
            }
            return String.join(",", cols);
        });

        check(conn, "foreign_keys", c -> {
            try (Statement st = c.createStatement()) {
                st.execute("DROP TABLE IF EXISTS kc");
                st.execute("DROP TABLE IF EXISTS kp");
                st.execute("CREATE TABLE kp (a int, b int, PRIMARY KEY (a, b))");
                st.execute("CREATE TABLE kc (x int, y int, CONSTRAINT kc_fk FOREIGN KEY (y, x)"
                        + " REFERENCES kp (b, a) ON DELETE CASCADE ON UPDATE SET NULL)");
            }
            DatabaseMetaData md = c.getMetaData();
            List<String> keys = new ArrayList<>();
            try (ResultSet rs = md.getImportedKeys(null, "public", "kc")) {
                keys.add("imported");
                keys.addAll(foreignKeyRows(rs));
            }
            try (ResultSet rs = md.getExportedKeys(null, "public", "kp")) {
                keys.add("exported");
                keys.addAll(foreignKeyRows(rs));
            }
            return String.join(",", keys);
        });
    }

    private static List<String> foreignKeyRows(ResultSet rs) throws SQLException {
        List<String> rows = new ArrayList<>();
        while (rs.next()) {
            rows.add(rs.getString("PKTABLE_NAME") + "." + rs.getString("PKCOLUMN_NAME") + ">"
                    + rs.getString("FKTABLE_NAME") + "." + rs.getString("FKCOLUMN_NAME") + ":"
                    + rs.getInt("KEY_SEQ") + ":" + rs.getInt("UPDATE_RULE") + ":"
                    + rs.getInt("DELETE_RULE") + ":" + rs.getString("FK_NAME") + ":"
                    + rs.getString("PK_NAME") + ":" + rs.getInt("DEFERRABILITY"));
        }
        return rows;
    }
}
