"""deploy/kubernetes/: the base and both overlays, rendered by the real kustomize (`kubectl kustomize`, the
machine's kubectl: Kustomize v5) and by a small offline merge beside it (resources, namespace, labels, images,
strategic-merge patches with ``$patch: delete``, JSON patches with test and replace), which must agree; validated
offline against the Kubernetes schemas `kubernetes-validate` ships; what the service needs is checked on the
rendered objects, and every flag the manifests pass to `advisor` is one the CLI has."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

KUBE = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes"
CLUSTER_WIDE = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume"}


def _merge(base, patch):
    """Strategic merge, the part these manifests use: maps merge, lists of named maps merge by name, other
    lists are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    if (isinstance(base, list) and isinstance(patch, list) and patch and all(isinstance(x, dict) and "name" in x
                                                                               for x in base + patch)):
        out = [dict(x) for x in base]
        for item in patch:
            same = [i for i, x in enumerate(out) if x["name"] == item["name"]]
            if same:
                out[same[0]] = _merge(out[same[0]], item)
            else:
                out.append(item)
        return out
    return patch


def _key(doc: dict) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


def _kubectl() -> str | None:
    return shutil.which("kubectl")


def render(folder: Path) -> list[dict]:
    """The objects `kubectl kustomize folder` prints (the offline merge where kubectl is missing, outside CI)."""
    if _kubectl() is None:
        assert not os.environ.get("CI"), "kubectl is missing: the manifests must be rendered by the real kustomize"
        return render_offline(folder)
    done = subprocess.run([_kubectl(), "kustomize", str(folder)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"kubectl kustomize {folder}: {done.stderr[-2000:]}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _json_patch(doc: dict, ops: list[dict], where: Path) -> None:
    """The JSON patch ops these manifests use (test, replace) on `doc`, in place."""
    for op in ops:
        *parents, last = [int(p) if p.isdigit() else p for p in op["path"].strip("/").split("/")]
        node = doc
        for part in parents:
            node = node[part]
        if op["op"] == "test":
            assert node[last] == op["value"], f"{where}: test {op['path']} failed: {node[last]!r}"
        else:
            assert op["op"] == "replace", f"{where}: op {op['op']!r} is not rendered offline"
            node[last] = op["value"]


def render_offline(folder: Path) -> list[dict]:
    """The objects `kubectl kustomize folder` would print, merged here (for the features used here)."""
    k = yaml.safe_load((folder / "kustomization.yaml").read_text())
    docs: list[dict] = []
    for res in k.get("resources", []):
        path = folder / res
        docs += render_offline(path) if path.is_dir() else [d for d in yaml.safe_load_all(path.read_text()) if d]
    for patch in k.get("patches", []):
        if "target" in patch:  # a JSON patch of the named object
            target = (patch["target"]["kind"], patch["target"]["name"])
            (doc,) = [d for d in docs if _key(d) == target]
            _json_patch(doc, yaml.safe_load((folder / patch["path"]).read_text()), folder / patch["path"])
            continue
        for p in yaml.safe_load_all((folder / patch["path"]).read_text()):
            index = [i for i, d in enumerate(docs) if _key(d) == _key(p)]
            assert index, f"{folder / patch['path']}: patches {_key(p)}, which no resource defines"
            if p.get("$patch") == "delete":
                del docs[index[0]]
            else:
                docs[index[0]] = _merge(docs[index[0]], p)
    for d in docs:
        for pairs in k.get("labels", []):
            d["metadata"].setdefault("labels", {}).update(pairs["pairs"])
        if k.get("namespace") and d["kind"] not in CLUSTER_WIDE:
            d["metadata"]["namespace"] = k["namespace"]
        for image in k.get("images", []):
            for c in _containers(d):
                if c["image"].split(":")[0] == image["name"]:
                    c["image"] = f"{image.get('newName', image['name'])}:{image.get('newTag', 'latest')}"
    return docs


def _pod_spec(doc: dict) -> dict | None:
    spec = doc.get("spec", {})
    if doc["kind"] == "CronJob":
        return spec["jobTemplate"]["spec"]["template"]["spec"]
    return spec.get("template", {}).get("spec")


def _containers(doc: dict) -> list[dict]:
    pod = _pod_spec(doc)
    return (pod or {}).get("containers", [])


def _one(docs: list[dict], kind: str, name: str) -> dict:
    found = [d for d in docs if _key(d) == (kind, name)]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} objects"
    return found[0]


@pytest.mark.parametrize("folder", ["base", "overlays/example", "overlays/external-triton"])
def test_manifests_validate_against_the_kubernetes_schemas(folder):
    import kubernetes_validate

    docs = render(KUBE / folder)
    version = kubernetes_validate.latest_version()
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)  # raises naming the field
    assert len({_key(d) for d in docs}) == len(docs)


def test_the_service_deployment_has_what_replicas_need():
    docs = render(KUBE / "overlays" / "example")
    deploy = _one(docs, "Deployment", "advisor")
    hpa = _one(docs, "HorizontalPodAutoscaler", "advisor")["spec"]
    assert "replicas" not in deploy["spec"], "the HPA owns the replicas: a fixed count would fight it"
    assert hpa["minReplicas"] == 3 and deploy["metadata"]["namespace"] == "advisor"
    pod = deploy["spec"]["template"]
    # /metrics needs an API key: no scrape annotation (it cannot carry one); README.md gives the scrape job
    assert "prometheus.io/scrape" not in pod["metadata"].get("annotations", {})
    (c,) = pod["spec"]["containers"]
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz" and "initialDelaySeconds" not in c["livenessProbe"]
    assert c["image"] == "registry.example.com/advisor:0.1.0"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz" and c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"] if "valueFrom" in e}
    assert env["ADVISOR_STORE_URL"]["name"] == "advisor-secrets" and "ADVISOR_API_KEYS" not in env
    # the key file (NAME KEY lines: tenants by name) is the Secret's api-keys, mounted where --keys reads it
    keys_arg = next(a for a in c["args"] if a.startswith("--keys="))
    mount = next(m for m in c["volumeMounts"] if keys_arg.split("=", 1)[1].startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "advisor-secrets" and volume["secret"]["items"][0]["key"] == "api-keys"
    assert set(c["resources"]["requests"]) == {"cpu", "memory"}
    assert _one(docs, "HorizontalPodAutoscaler", "advisor")["spec"]["scaleTargetRef"]["name"] == "advisor"
    selector = _one(docs, "Service", "advisor")["spec"]["selector"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert "--url=triton:8001" in c["args"] and _one(docs, "Deployment", "triton")
    _one(docs, "CronJob", "advisor-promotion")


def test_the_external_triton_overlay_drops_triton_and_names_the_endpoint():
    docs = render(KUBE / "overlays" / "external-triton")
    assert not [d for d in docs if d["metadata"]["name"] in ("triton", "triton-from-advisor-only")]
    (c,) = _containers(_one(docs, "Deployment", "advisor"))
    assert "--url=triton.inference.svc.cluster.local:8001" in c["args"]
    (base,) = _containers(_one(render(KUBE / "base"), "Deployment", "advisor"))
    assert [a for a in c["args"] if not a.startswith("--url=")] == [a for a in base["args"] if
                                                                       not a.startswith("--url=")]
    assert "--keys=/etc/advisor-keys/api-keys" in c["args"], "the tenants' keys must survive the overlay"
    egress = _one(docs, "NetworkPolicy", "advisor-egress-to-external-triton")["spec"]["egress"]
    assert egress[0]["to"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "inference"}


@pytest.mark.skipif(_kubectl() is None and not os.environ.get("CI"), reason="kubectl is not installed")
@pytest.mark.parametrize("folder", ["base", "overlays/example", "overlays/external-triton"])
def test_the_offline_merge_agrees_with_the_real_kustomize(folder):
    real = {_key(d): d for d in render(KUBE / folder)}
    offline = {_key(d): d for d in render_offline(KUBE / folder)}
    assert real.keys() == offline.keys()
    for key, doc in real.items():
        assert doc == offline[key], f"{folder}: {key} differs"


def test_egress_is_bounded_and_the_cluster_facts_hold():
    """Egress: the advisor pods reach DNS, Triton and PostgreSQL only; the promotion job DNS and PostgreSQL.
    Triton (one GPU) is replaced, not rolled; the CronJob cannot hang past its deadline; the namespace enforces
    the restricted Pod Security Standard; nothing lands in the default namespace."""
    docs = render(KUBE / "overlays" / "example")
    egress = _one(docs, "NetworkPolicy", "advisor-egress")["spec"]
    assert egress["policyTypes"] == ["Egress"]
    ports = {p["port"] for rule in egress["egress"] for p in rule["ports"]}
    assert ports == {53, 8000, 8001, 8002, 5432}
    promotion = _one(docs, "NetworkPolicy", "promotion-egress")["spec"]
    assert {p["port"] for rule in promotion["egress"] for p in rule["ports"]} == {53, 5432}
    assert _one(docs, "Deployment", "triton")["spec"]["strategy"] == {"type": "Recreate"}
    job = _one(docs, "CronJob", "advisor-promotion")["spec"]
    assert job["concurrencyPolicy"] == "Forbid" and job["jobTemplate"]["spec"]["activeDeadlineSeconds"] > 0
    labels = _one(docs, "Namespace", "advisor")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    for folder in FOLDERS:
        assert all(d["metadata"].get("namespace") == "advisor" for d in render(KUBE / folder)
                   if d["kind"] not in CLUSTER_WIDE), folder


def test_every_flag_the_manifests_pass_is_an_advisor_option():
    import typer.main

    from advisor.cli import build_app

    root = typer.main.get_command(build_app())
    docs = render(KUBE / "base")
    calls = [_containers(_one(docs, "Deployment", "advisor"))[0]["args"]]
    script = _containers(_one(docs, "CronJob", "advisor-promotion"))[0]["args"][0]
    calls += [shlex.split(part)[1:] for part in script.split("&&")]
    for argv in calls:
        command, words = root, list(argv)
        while words and hasattr(command, "commands") and words[0] in command.commands:
            command = command.commands[words.pop(0)]
        options = {o for p in command.params for o in p.opts}
        flags = {w.split("=")[0] for w in words if w.startswith("--")}
        assert flags <= options, f"{' '.join(argv[:3])}: unknown options {sorted(flags - options)}"


FOLDERS = ["base", "overlays/example", "overlays/external-triton"]


def _pods(docs: list[dict]) -> list[tuple[dict, dict]]:
    return [(d, _pod_spec(d)) for d in docs if _pod_spec(d) is not None]


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_pod_meets_the_restricted_pod_security_standard(folder):
    """Issue 38: non-root, no privilege escalation, no capabilities, RuntimeDefault seccomp, a read-only root
    file system (its writable places are emptyDirs or claims), CPU and memory requests and limits everywhere."""
    docs = render(KUBE / folder)
    pods = _pods(docs)
    assert pods
    for doc, pod in pods:
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        assert pod["securityContext"]["runAsNonRoot"] is True, where
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", where
        assert pod.get("automountServiceAccountToken") is False, where
        assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), where
        assert not any("hostPath" in v for v in pod.get("volumes", [])), where
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, where
            assert sc["capabilities"]["drop"] == ["ALL"] and "add" not in sc["capabilities"], where
            assert sc["runAsNonRoot"] is True and sc["seccompProfile"]["type"] == "RuntimeDefault", where
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(c["resources"][kind]), f"{where}: {kind}"
            image = c["image"]
            assert "@sha256:" in image or (":" in image.rsplit("/", 1)[-1]
                                           and not image.endswith(":latest")), f"{where}: {image}"
            mounts = {m["name"] for m in c.get("volumeMounts", []) if not m.get("readOnly")}
            volumes = {v["name"]: v for v in pod["volumes"]}
            assert all("emptyDir" in volumes[m] or "persistentVolumeClaim" in volumes[m] for m in mounts), where
            assert "/tmp" in {m["mountPath"] for m in c["volumeMounts"]}, f"{where}: no writable /tmp"


def test_only_advisor_reaches_triton_and_a_disruption_budget_keeps_one_pod():
    docs = render(KUBE / "overlays" / "example")
    policy = _one(docs, "NetworkPolicy", "triton-from-advisor-only")["spec"]
    assert policy["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "triton"}
    inference = [rule for rule in policy["ingress"] if {p["port"] for p in rule["ports"]} & {"grpc", "http"}]
    assert len(inference) == 1 and inference[0]["from"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "advisor"}}}]
    assert {p["port"] for r in policy["ingress"] for p in r["ports"]} == {"grpc", "http", "metrics"}
    advisor_pods = _pod_spec(_one(docs, "Deployment", "advisor"))
    assert advisor_pods and _one(docs, "NetworkPolicy", "advisor-from-clients")
    pdb = _one(docs, "PodDisruptionBudget", "advisor")["spec"]
    assert pdb["minAvailable"] == 1 and pdb["selector"]["matchLabels"] == {"app.kubernetes.io/name": "advisor"}


def test_no_secret_on_a_command_line_and_the_overlay_writes_no_secret():
    """The CronJob's commands read ADVISOR_STORE_URL from the environment; the example overlay leaves the
    Secret created out of band alone."""
    docs = render(KUBE / "overlays" / "example")
    (c,) = _containers(_one(docs, "CronJob", "advisor-promotion"))
    assert "ADVISOR_STORE_URL" not in " ".join(c["command"] + c["args"])
    assert "ADVISOR_STORE_URL" in {e["name"] for e in c["env"]}
    assert not [d for d in docs if d["kind"] == "Secret"]


def _checkov() -> str | None:
    """checkov from its own venv (``make checkov``: .venv-checkov, pinned in the Makefile), else on PATH."""
    own = KUBE.parent.parent / ".venv-checkov" / "bin" / "checkov"
    return str(own) if own.is_file() else shutil.which("checkov")


@pytest.mark.skipif(_checkov() is None and not os.environ.get("CI"),
                    reason="checkov is not installed (make checkov; CI installs it)")
@pytest.mark.parametrize("folder", ["base", "overlays/example", "overlays/external-triton"])
def test_checkov_passes_every_kubernetes_check(folder, tmp_path):
    """checkov (offline, its Kubernetes checks: the restricted Pod Security Standard and more) on the rendered
    objects: no failed check; a skip is only the ``checkov.io/skip`` annotations the manifests justify."""
    assert _checkov(), "checkov missing: `make checkov` installs it into .venv-checkov"
    for i, doc in enumerate(render(KUBE / folder)):
        (tmp_path / f"{i:02d}-{doc['kind']}-{doc['metadata']['name']}.yaml").write_text(yaml.safe_dump(doc))
    done = subprocess.run([_checkov(), "-d", str(tmp_path), "--framework", "kubernetes", "--output", "json",
                           "--compact", "--skip-download"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "BC_SKIP_MAPPING": "TRUE"})
    report = json.loads(done.stdout)
    results = report["results"] if isinstance(report, dict) else report[0]["results"]
    failed = [f"{r['check_id']} {r['resource']}: {r['check_name']}" for r in results["failed_checks"]]
    assert not failed, "\n".join(failed)
    assert results["passed_checks"], "checkov checked nothing"
