"""deploy/kubernetes/: the base and both overlays, rendered by a small kustomize merge (resources, namespace,
labels, images, strategic-merge patches with ``$patch: delete``) and validated offline against the Kubernetes
schemas `kubernetes-validate` ships; what the service needs is checked on the rendered objects, and every flag
the manifests pass to `advisor` is one the CLI has."""

from __future__ import annotations

import shlex
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


def render(folder: Path) -> list[dict]:
    """The objects `kubectl kustomize folder` would print (for the features used here)."""
    k = yaml.safe_load((folder / "kustomization.yaml").read_text())
    docs: list[dict] = []
    for res in k.get("resources", []):
        path = folder / res
        docs += render(path) if path.is_dir() else [d for d in yaml.safe_load_all(path.read_text()) if d]
    for patch in k.get("patches", []):
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
    assert deploy["spec"]["replicas"] == 3 and deploy["metadata"]["namespace"] == "advisor"
    pod = deploy["spec"]["template"]
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    (c,) = pod["spec"]["containers"]
    assert c["image"] == "registry.example.com/advisor:0.1.0"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz" and c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"]}
    assert env["ADVISOR_STORE_URL"]["name"] == env["ADVISOR_API_KEYS"]["name"] == "advisor-secrets"
    assert set(c["resources"]["requests"]) == {"cpu", "memory"}
    assert _one(docs, "HorizontalPodAutoscaler", "advisor")["spec"]["scaleTargetRef"]["name"] == "advisor"
    selector = _one(docs, "Service", "advisor")["spec"]["selector"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert "--url=triton:8001" in c["args"] and _one(docs, "Deployment", "triton")
    _one(docs, "CronJob", "advisor-promotion")


def test_the_external_triton_overlay_drops_triton_and_names_the_endpoint():
    docs = render(KUBE / "overlays" / "external-triton")
    assert not [d for d in docs if d["metadata"]["name"] == "triton"]
    (c,) = _containers(_one(docs, "Deployment", "advisor"))
    assert "--url=triton.inference.svc.cluster.local:8001" in c["args"]


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
