import { FormEvent, useState } from "react";
import { ConfigRow, TopicDetail, TopicRow, api, get } from "./api";
import { ErrorBox, formatBytes, formatDuration, href, useLoad } from "./common";

export function Topics() {
  const topics = useLoad(() => get<{ topics: TopicRow[] }>("/api/topics"), [], 10000);
  const [search, setSearch] = useState("");
  const [showInternal, setShowInternal] = useState(false);
  const [creating, setCreating] = useState(false);
  const rows = (topics.data?.topics ?? []).filter(
    (t) => (showInternal || !t.internal) && t.name.toLowerCase().includes(search.toLowerCase()),
  );
  return (
    <section>
      <h1>Topics</h1>
      <div className="toolbar">
        <label>
          Search <input value={search} onChange={(e) => setSearch(e.target.value)} placeholder="topic name" />
        </label>
        <label>
          <input type="checkbox" checked={showInternal} onChange={(e) => setShowInternal(e.target.checked)} /> internal
        </label>
        <button onClick={() => setCreating(!creating)}>{creating ? "Cancel" : "Create topic"}</button>
        <button onClick={() => void topics.reload()}>Refresh</button>
      </div>
      {creating && (
        <CreateTopic
          onDone={() => {
            setCreating(false);
            void topics.reload();
          }}
        />
      )}
      <ErrorBox error={topics.error} />
      <table>
        <thead>
          <tr>
            <th>Name</th>
            <th>Partitions</th>
            <th>Replicas</th>
            <th>Under-replicated</th>
            <th>Messages</th>
            <th>Size</th>
            <th>Retention</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          {rows.map((t) => (
            <tr key={t.name} data-testid={`topic-row-${t.name}`}>
              <td>
                <a href={href("topics", t.name)}>{t.name}</a>
              </td>
              <td>{t.partitions}</td>
              <td>{t.replicas}</td>
              <td className={t.under_replicated ? "down" : ""}>{t.under_replicated}</td>
              <td>{t.messages ?? "–"}</td>
              <td>{formatBytes(t.size)}</td>
              <td>{formatDuration(t.retention_ms)}</td>
              <td>
                <a href={href("messages", t.name)}>messages</a>
              </td>
            </tr>
          ))}
          {topics.data && rows.length === 0 && (
            <tr>
              <td colSpan={8} className="muted">
                No topics.
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </section>
  );
}

function CreateTopic({ onDone }: { onDone: () => void }) {
  const [name, setName] = useState("");
  const [partitions, setPartitions] = useState("1");
  const [replication, setReplication] = useState("1");
  const [configs, setConfigs] = useState("");
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const parsed: Record<string, string> = {};
    for (const line of configs.split("\n").map((l) => l.trim()).filter(Boolean)) {
      const at = line.indexOf("=");
      if (at < 1) {
        setError(`config line "${line}" is not name=value`);
        return;
      }
      parsed[line.slice(0, at).trim()] = line.slice(at + 1).trim();
    }
    try {
      await api("POST", "/api/topics", {
        name,
        partitions: Number(partitions),
        replication_factor: Number(replication),
        configs: parsed,
      });
      onDone();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <form className="panel" onSubmit={(e) => void submit(e)} aria-label="Create topic">
      <label>
        Name <input name="name" value={name} onChange={(e) => setName(e.target.value)} required autoFocus />
      </label>
      <label>
        Partitions <input name="partitions" type="number" min={1} value={partitions} onChange={(e) => setPartitions(e.target.value)} />
      </label>
      <label>
        Replication factor <input name="replication" type="number" min={1} value={replication} onChange={(e) => setReplication(e.target.value)} />
      </label>
      <label className="wide">
        Configs (name=value per line, Kafka's names)
        <textarea name="configs" rows={2} value={configs} onChange={(e) => setConfigs(e.target.value)} placeholder="retention.ms=86400000" />
      </label>
      <button type="submit">Create</button>
      <ErrorBox error={error} />
    </form>
  );
}

export function TopicPage({ name }: { name: string }) {
  const topic = useLoad(() => get<TopicDetail>(`/api/topics/${encodeURIComponent(name)}`), [name], 10000);
  const [confirm, setConfirm] = useState("");
  const [deleteError, setDeleteError] = useState<string | null>(null);
  const remove = async () => {
    try {
      await api("DELETE", `/api/topics/${encodeURIComponent(name)}`, { confirm });
      window.location.hash = href("topics");
    } catch (err) {
      setDeleteError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <section>
      <h1>
        Topic <span className="mono">{name}</span>
      </h1>
      <p>
        <a href={href("messages", name)}>Browse messages</a> · <a href={href("topics")}>All topics</a>
      </p>
      <ErrorBox error={topic.error} />
      {topic.data && (
        <>
          <h2>Partitions</h2>
          <table>
            <thead>
              <tr>
                <th>Partition</th>
                <th>Leader</th>
                <th>Replicas</th>
                <th>ISR</th>
                <th>Log start</th>
                <th>Log end</th>
                <th>Messages</th>
                <th>Size</th>
              </tr>
            </thead>
            <tbody>
              {topic.data.partitions.map((p) => (
                <tr key={p.partition}>
                  <td>{p.partition}</td>
                  <td>{p.leader}</td>
                  <td>{p.replicas.join(", ")}</td>
                  <td className={p.isr.length < p.replicas.length ? "down" : ""}>{p.isr.join(", ")}</td>
                  <td>{p.log_start_offset}</td>
                  <td>{p.log_end_offset}</td>
                  <td>{p.log_end_offset - p.log_start_offset}</td>
                  <td>{formatBytes(p.size)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <Configs name={name} configs={topic.data.configs} onChange={() => void topic.reload()} />
        </>
      )}
      <h2>Delete</h2>
      <div className="panel danger">
        <label>
          Type <strong className="mono">{name}</strong> to delete this topic and all its messages{" "}
          <input aria-label="Confirm topic name" value={confirm} onChange={(e) => setConfirm(e.target.value)} />
        </label>
        <button className="danger" disabled={confirm !== name} onClick={() => void remove()}>
          Delete topic
        </button>
        <ErrorBox error={deleteError} />
      </div>
    </section>
  );
}

function Configs({ name, configs, onChange }: { name: string; configs: ConfigRow[]; onChange: () => void }) {
  const [editing, setEditing] = useState<string | null>(null);
  const [value, setValue] = useState("");
  const [error, setError] = useState<string | null>(null);
  const save = async (config: string, reset: boolean) => {
    try {
      await api("PATCH", `/api/topics/${encodeURIComponent(name)}/configs`, reset ? { delete: [config] } : { set: { [config]: value } });
      setEditing(null);
      setError(null);
      onChange();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <>
      <h2>Configs</h2>
      <ErrorBox error={error} />
      <table>
        <thead>
          <tr>
            <th>Name</th>
            <th>Value</th>
            <th>Source</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          {configs.map((c) => (
            <tr key={c.name}>
              <td className="mono">{c.name}</td>
              <td className="mono">
                {editing === c.name ? (
                  <input
                    aria-label={`New value of ${c.name}`}
                    value={value}
                    autoFocus
                    onChange={(e) => setValue(e.target.value)}
                    onKeyDown={(e) => {
                      if (e.key === "Enter") void save(c.name, false);
                      if (e.key === "Escape") setEditing(null);
                    }}
                  />
                ) : (
                  c.value ?? "(sensitive)"
                )}
              </td>
              <td>{c.default ? "default" : c.source}</td>
              <td>
                {!c.read_only &&
                  (editing === c.name ? (
                    <>
                      <button onClick={() => void save(c.name, false)}>Save</button>
                      <button onClick={() => setEditing(null)}>Cancel</button>
                    </>
                  ) : (
                    <>
                      <button
                        onClick={() => {
                          setEditing(c.name);
                          setValue(c.value ?? "");
                        }}
                      >
                        Edit
                      </button>
                      {!c.default && <button onClick={() => void save(c.name, true)}>Reset to default</button>}
                    </>
                  ))}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
