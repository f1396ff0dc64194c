import { AuditEntry, get } from "./api";
import { ErrorBox, useLoad } from "./common";

export function Audit() {
  const audit = useLoad(() => get<{ entries: AuditEntry[] }>("/api/audit"), [], 10000);
  return (
    <section>
      <h1>Audit log</h1>
      <p className="muted">Every change made through the console: who, when, what.</p>
      <ErrorBox error={audit.error} />
      <table>
        <thead>
          <tr>
            <th>Time (UTC)</th>
            <th>User</th>
            <th>Action</th>
            <th>Target</th>
            <th>Details</th>
            <th>Result</th>
          </tr>
        </thead>
        <tbody>
          {(audit.data?.entries ?? []).map((e, i) => (
            <tr key={i} data-testid="audit-row">
              <td>{e.time}</td>
              <td>{e.user}</td>
              <td>{e.action}</td>
              <td className="mono">{e.target}</td>
              <td className="mono clip">{JSON.stringify(e.details)}</td>
              <td className={e.ok ? "up" : "down"}>{e.ok ? "ok" : e.error}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
