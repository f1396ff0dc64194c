// Security page: the cluster's ACLs (filters, create from a template or one by one, delete
// with confirmation) and SCRAM users (create, rotate a password, delete with typed
// confirmation). The cluster's ACLs decide whether the signed-in user may do any of it; its
// refusals are shown as the API words them.
import { FormEvent, useState } from "react";
import { Acl, AclList, ScramUser, api, get } from "./api";
import { ErrorBox, useLoad } from "./common";

const RESOURCE_TYPES = ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"];
const OPERATIONS = ["ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
  "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"];
const key = (a: Acl) => [a.resource_type, a.name, a.pattern_type, a.principal, a.host, a.operation, a.permission].join("|");

async function attempt(setError: (e: string | null) => void, action: () => Promise<void>) {
  try {
    await action();
    setError(null);
  } catch (err) {
    setError(err instanceof Error ? err.message : String(err));
  }
}

export function Security() {
  return (
    <section>
      <h1>Security</h1>
      <Acls />
      <Users />
    </section>
  );
}

function Acls() {
  const [filters, setFilters] = useState({ resource_type: "", name: "", pattern_type: "", principal: "" });
  const [applied, setApplied] = useState(filters);
  const query = new URLSearchParams(Object.entries(applied).filter(([, v]) => v)).toString();
  const acls = useLoad(() => get<AclList>(`/api/acls${query ? "?" + query : ""}`), [query]);
  const [error, setError] = useState<string | null>(null);
  const [confirming, setConfirming] = useState<string | null>(null);
  const remove = (a: Acl) =>
    attempt(setError, async () => {
      await api("DELETE", "/api/acls", { acls: [a], confirm: true });
      setConfirming(null);
      await acls.reload();
    });
  const set = (k: keyof typeof filters) => (e: { target: { value: string } }) => setFilters({ ...filters, [k]: e.target.value });
  return (
    <>
      <h2>ACLs</h2>
      <form className="toolbar" aria-label="ACL filters" onSubmit={(e) => { e.preventDefault(); setApplied(filters); }}>
        <label>
          Resource type
          <select value={filters.resource_type} onChange={set("resource_type")}>
            <option value="">any</option>
            {RESOURCE_TYPES.map((t) => <option key={t}>{t}</option>)}
          </select>
        </label>
        <label>
          Resource name <input value={filters.name} onChange={set("name")} />
        </label>
        <label>
          Pattern
          <select value={filters.pattern_type} onChange={set("pattern_type")}>
            <option value="">any</option>
            <option>LITERAL</option>
            <option>PREFIXED</option>
            <option value="MATCH">MATCH (applies to the name)</option>
          </select>
        </label>
        <label>
          Principal <input value={filters.principal} onChange={set("principal")} placeholder="User:alice" />
        </label>
        <button type="submit">Filter</button>
      </form>
      <ErrorBox error={acls.error} />
      <ErrorBox error={error} />
      {acls.data && !acls.data.enabled && <p className="muted" data-testid="acls-disabled">ACLs are off: {acls.data.reason}.</p>}
      {acls.data?.enabled && (
        <table data-testid="acl-table">
          <thead>
            <tr>
              <th>Resource</th>
              <th>Name</th>
              <th>Pattern</th>
              <th>Principal</th>
              <th>Host</th>
              <th>Operation</th>
              <th>Permission</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {acls.data.acls.map((a) => (
              <tr key={key(a)} data-testid="acl-row">
                <td>{a.resource_type}</td>
                <td className="mono">{a.name}</td>
                <td>{a.pattern_type}</td>
                <td className="mono">{a.principal}</td>
                <td className="mono">{a.host}</td>
                <td>{a.operation}</td>
                <td className={a.permission === "ALLOW" ? "up" : "down"}>{a.permission}</td>
                <td>
                  {confirming === key(a) ? (
                    <>
                      <button className="danger" onClick={() => void remove(a)}>Confirm delete</button>{" "}
                      <button onClick={() => setConfirming(null)}>Cancel</button>
                    </>
                  ) : (
                    <button aria-label={`Delete ACL ${a.operation} ${a.resource_type} ${a.name} for ${a.principal}`} onClick={() => setConfirming(key(a))}>
                      Delete
                    </button>
                  )}
                </td>
              </tr>
            ))}
            {acls.data.acls.length === 0 && (
              <tr>
                <td colSpan={8} className="muted">No ACLs match.</td>
              </tr>
            )}
          </tbody>
        </table>
      )}
      <TemplateForm onCreated={() => void acls.reload()} />
      <SingleAclForm onCreated={() => void acls.reload()} />
    </>
  );
}

function TemplateForm({ onCreated }: { onCreated: () => void }) {
  const [form, setForm] = useState({ template: "producer", principal: "", topic: "", pattern_type: "LITERAL", group: "", prefix: "" });
  const [preview, setPreview] = useState<Acl[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const set = (k: keyof typeof form) => (e: { target: { value: string } }) => {
    setForm({ ...form, [k]: e.target.value });
    setPreview(null);
  };
  const body = () => {
    const b: Record<string, unknown> = { template: form.template, principal: form.principal };
    if (form.template === "admin") b.prefix = form.prefix;
    else Object.assign(b, { topic: form.topic, pattern_type: form.pattern_type });
    if (form.template === "consumer") b.group = form.group;
    return b;
  };
  const doPreview = () =>
    attempt(setError, async () => setPreview((await api<{ preview: Acl[] }>("POST", "/api/acls/template", { ...body(), preview: true })).preview));
  const create = (e: FormEvent) => {
    e.preventDefault();
    void attempt(setError, async () => {
      const r = await api<{ created: Acl[] }>("POST", "/api/acls/template", body());
      setStatus(`Created ${r.created.length} ACLs.`);
      setPreview(null);
      onCreated();
    });
  };
  return (
    <details className="panel" open>
      <summary>Create ACLs from a template</summary>
      <form aria-label="ACL template" onSubmit={create}>
        <label>
          Template
          <select value={form.template} onChange={set("template")}>
            <option value="producer">Producer of a topic or prefix</option>
            <option value="consumer">Consumer of a topic or prefix, with a group</option>
            <option value="admin">Admin of a prefix</option>
          </select>
        </label>
        <label>
          Principal <input value={form.principal} onChange={set("principal")} placeholder="User:alice" required />
        </label>
        {form.template === "admin" ? (
          <label>
            Prefix <input value={form.prefix} onChange={set("prefix")} required />
          </label>
        ) : (
          <>
            <label>
              Topic <input value={form.topic} onChange={set("topic")} required />
            </label>
            <label>
              Topic pattern
              <select value={form.pattern_type} onChange={set("pattern_type")}>
                <option>LITERAL</option>
                <option>PREFIXED</option>
              </select>
            </label>
          </>
        )}
        {form.template === "consumer" && (
          <label>
            Group <input value={form.group} onChange={set("group")} required />
          </label>
        )}
        <button type="button" onClick={() => void doPreview()}>Preview</button>
        <button type="submit">Create ACLs</button>
      </form>
      {preview && (
        <ul data-testid="template-preview">
          {preview.map((a) => (
            <li key={key(a)} className="mono">
              {a.permission} {a.principal} {a.operation} on {a.resource_type} {a.pattern_type} {a.name}
            </li>
          ))}
        </ul>
      )}
      {status && <p role="status">{status}</p>}
      <ErrorBox error={error} />
    </details>
  );
}

function SingleAclForm({ onCreated }: { onCreated: () => void }) {
  const [form, setForm] = useState({ resource_type: "TOPIC", name: "", pattern_type: "LITERAL", principal: "", host: "*", operation: "READ", permission: "ALLOW" });
  const [error, setError] = useState<string | null>(null);
  const set = (k: keyof typeof form) => (e: { target: { value: string } }) => setForm({ ...form, [k]: e.target.value });
  const create = (e: FormEvent) => {
    e.preventDefault();
    void attempt(setError, async () => {
      await api("POST", "/api/acls", { acls: [{ ...form, name: form.resource_type === "CLUSTER" ? "kafka-cluster" : form.name }] });
      onCreated();
    });
  };
  return (
    <details className="panel">
      <summary>Create one ACL</summary>
      <form aria-label="One ACL" onSubmit={create}>
        <label>
          Resource type
          <select value={form.resource_type} onChange={set("resource_type")}>
            {RESOURCE_TYPES.map((t) => <option key={t}>{t}</option>)}
          </select>
        </label>
        {form.resource_type !== "CLUSTER" && (
          <label>
            Resource name <input value={form.name} onChange={set("name")} required />
          </label>
        )}
        <label>
          Pattern
          <select value={form.pattern_type} onChange={set("pattern_type")}>
            <option>LITERAL</option>
            <option>PREFIXED</option>
          </select>
        </label>
        <label>
          Principal <input value={form.principal} onChange={set("principal")} placeholder="User:alice" required />
        </label>
        <label>
          Host <input value={form.host} onChange={set("host")} />
        </label>
        <label>
          Operation
          <select value={form.operation} onChange={set("operation")}>
            {OPERATIONS.map((o) => <option key={o}>{o}</option>)}
          </select>
        </label>
        <label>
          Permission
          <select value={form.permission} onChange={set("permission")}>
            <option>ALLOW</option>
            <option>DENY</option>
          </select>
        </label>
        <button type="submit">Create ACL</button>
      </form>
      <ErrorBox error={error} />
    </details>
  );
}

function Users() {
  const users = useLoad(() => get<{ users: ScramUser[] }>("/api/users"), []);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const [form, setForm] = useState({ name: "", password: "", mechanism: "SCRAM-SHA-256", iterations: "4096" });
  const [rotating, setRotating] = useState<string | null>(null);
  const [newPassword, setNewPassword] = useState("");
  const [deleting, setDeleting] = useState<string | null>(null);
  const [typed, setTyped] = useState("");
  const set = (k: keyof typeof form) => (e: { target: { value: string } }) => setForm({ ...form, [k]: e.target.value });
  const create = (e: FormEvent) => {
    e.preventDefault();
    void attempt(setError, async () => {
      await api("POST", "/api/users", { ...form, iterations: Number(form.iterations) });
      setStatus(`Created user ${form.name}.`);
      setForm({ ...form, name: "", password: "" });
      await users.reload();
    });
  };
  const rotate = (name: string, mechanism: string) =>
    attempt(setError, async () => {
      await api("PUT", `/api/users/${encodeURIComponent(name)}/password`, { password: newPassword, mechanism });
      setStatus(`Rotated the password of ${name}.`);
      setRotating(null);
      setNewPassword("");
    });
  const remove = (name: string) =>
    attempt(setError, async () => {
      await api("DELETE", `/api/users/${encodeURIComponent(name)}`, { confirm: typed });
      setStatus(`Deleted user ${name}.`);
      setDeleting(null);
      setTyped("");
      await users.reload();
    });
  return (
    <>
      <h2>SCRAM users</h2>
      <ErrorBox error={users.error} />
      <ErrorBox error={error} />
      {status && <p role="status">{status}</p>}
      {users.data && (
        <table data-testid="user-table">
          <thead>
            <tr>
              <th>User</th>
              <th>Mechanisms</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {users.data.users.map((u) => (
              <tr key={u.name} data-testid={`user-row-${u.name}`}>
                <td className="mono">{u.name}</td>
                <td>{u.mechanisms.map((m) => `${m.mechanism} (${m.iterations} iterations)`).join(", ")}</td>
                <td>
                  {rotating === u.name ? (
                    <form aria-label={`New password for ${u.name}`} className="toolbar" onSubmit={(e) => { e.preventDefault(); void rotate(u.name, u.mechanisms[0]?.mechanism ?? "SCRAM-SHA-256"); }}>
                      <label>
                        New password <input type="password" value={newPassword} onChange={(e) => setNewPassword(e.target.value)} required autoFocus />
                      </label>
                      <button type="submit">Save password</button>
                      <button type="button" onClick={() => setRotating(null)}>Cancel</button>
                    </form>
                  ) : deleting === u.name ? (
                    <form aria-label={`Delete ${u.name}`} className="toolbar" onSubmit={(e) => { e.preventDefault(); void remove(u.name); }}>
                      <label>
                        Type {u.name} to delete <input value={typed} onChange={(e) => setTyped(e.target.value)} autoFocus />
                      </label>
                      <button type="submit" className="danger" disabled={typed !== u.name}>Delete user</button>
                      <button type="button" onClick={() => setDeleting(null)}>Cancel</button>
                    </form>
                  ) : (
                    <>
                      <button onClick={() => setRotating(u.name)} aria-label={`Rotate password of ${u.name}`}>Rotate password</button>{" "}
                      <button className="danger" onClick={() => { setDeleting(u.name); setTyped(""); }} aria-label={`Delete user ${u.name}`}>
                        Delete
                      </button>
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <details className="panel">
        <summary>Create a user</summary>
        <form aria-label="New user" onSubmit={create}>
          <label>
            User name <input value={form.name} onChange={set("name")} required />
          </label>
          <label>
            Password <input type="password" value={form.password} onChange={set("password")} required autoComplete="new-password" />
          </label>
          <label>
            Mechanism
            <select value={form.mechanism} onChange={set("mechanism")}>
              <option>SCRAM-SHA-256</option>
              <option>SCRAM-SHA-512</option>
            </select>
          </label>
          <label>
            Iterations <input type="number" min={4096} max={16384} value={form.iterations} onChange={set("iterations")} />
          </label>
          <button type="submit">Create user</button>
        </form>
      </details>
    </>
  );
}
