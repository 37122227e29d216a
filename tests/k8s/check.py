#!/usr/bin/python3
"""Offline checks of the Kubernetes manifests (k8s/), as scripts/test runs them.

No cluster is reachable here, so this checks what can be checked without one:

1. The schema: every document is decoded against the typed models of the
   official Kubernetes Python client (Debian's python3-kubernetes, generated
   from the API's OpenAPI definitions): an unknown field, a value of the wrong
   type or a missing required field is an error with its path.
2. What ties the objects together: the StatefulSet's serviceName is a headless
   service, selectors match the pod labels, probes name ports the container
   has, Secrets and ConfigMaps that pods use are in the set, and the cells'
   termination grace period covers their drain (timeout_max + 40 s, from
   the cells' mcp.conf).

usage: check.py DIR   (prints one line per problem; exit 1 when there is one)
"""
import re
import sys
from pathlib import Path

import yaml
import kubernetes.client as k8s

PRIMITIVES = {"str": str, "int": int, "bool": bool, "float": (int, float)}


def model_of(doc):
    """The model class name of a document: apps/v1 StatefulSet -> V1StatefulSet."""
    version = doc.get("apiVersion", "").split("/")[-1]
    return version.capitalize() + doc.get("kind", "")


def check_value(value, type_name, path, problems):
    if value is None:
        return
    if type_name == "object":
        return
    if type_name in PRIMITIVES:
        ok = isinstance(value, PRIMITIVES[type_name]) and not (type_name != "bool" and isinstance(value, bool))
        if not ok:
            problems.append(f"{path}: expected {type_name}, got {type(value).__name__} {value!r}")
        return
    m = re.fullmatch(r"list\[(.+)\]", type_name)
    if m:
        if not isinstance(value, list):
            problems.append(f"{path}: expected a list")
            return
        for i, item in enumerate(value):
            check_value(item, m.group(1), f"{path}[{i}]", problems)
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if m:
        if not isinstance(value, dict):
            problems.append(f"{path}: expected a map")
            return
        for k, item in value.items():
            check_value(item, m.group(1), f"{path}.{k}", problems)
        return
    check_object(value, type_name, path, problems)


def check_object(value, type_name, path, problems):
    cls = getattr(k8s, type_name, None)
    if cls is None:
        problems.append(f"{path}: no model {type_name} in the Kubernetes client")
        return
    if not isinstance(value, dict):
        problems.append(f"{path}: expected an object ({type_name})")
        return
    by_json = {json_name: attr for attr, json_name in cls.attribute_map.items()}
    for key, item in value.items():
        if key not in by_json:
            problems.append(f"{path}.{key}: unknown field of {type_name}")
            continue
        check_value(item, cls.openapi_types[by_json[key]], f"{path}.{key}", problems)
    # Required fields: the model's constructor refuses None for them.
    try:
        cls(**{by_json[k]: v for k, v in value.items() if k in by_json})
    except ValueError as e:
        problems.append(f"{path}: {e}")
    except TypeError:
        pass


def pods(docs):
    for d in docs:
        spec = d.get("spec", {})
        if "template" in spec:
            yield d, spec["template"]


def check_links(docs, problems):
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    for d, tpl in pods(docs):
        name = f"{d['kind']}/{d['metadata']['name']}"
        labels = tpl.get("metadata", {}).get("labels", {})
        sel = d["spec"].get("selector", {}).get("matchLabels", {})
        if any(labels.get(k) != v for k, v in sel.items()):
            problems.append(f"{name}: the selector does not match the pod's labels")
        for c in tpl["spec"]["containers"]:
            ports = {p.get("name") for p in c.get("ports", [])} | {p["containerPort"] for p in c.get("ports", [])}
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                p = c.get(probe, {})
                port = (p.get("httpGet") or p.get("tcpSocket") or {}).get("port")
                if port is not None and port not in ports:
                    problems.append(f"{name}: {probe} names port {port!r}, which the container does not have")
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref and ref["name"] not in by_kind.get("Secret", {}):
                    problems.append(f"{name}: env {e['name']} takes Secret {ref['name']}, which is not in the set")
            for e in c.get("envFrom", []):
                ref = e.get("configMapRef")
                if ref and ref["name"] not in by_kind.get("ConfigMap", {}):
                    problems.append(f"{name}: envFrom ConfigMap {ref['name']} is not in the set")
        for v in tpl["spec"].get("volumes", []):
            cm = v.get("configMap")
            if cm and cm["name"] not in by_kind.get("ConfigMap", {}):
                problems.append(f"{name}: volume {v['name']} takes ConfigMap {cm['name']}, which is not in the set")
    for s in by_kind.get("StatefulSet", {}).values():
        svc = by_kind.get("Service", {}).get(s["spec"]["serviceName"])
        if svc is None or svc["spec"].get("clusterIP") != "None":
            problems.append(f"StatefulSet/{s['metadata']['name']}: serviceName must be a headless service of the set")
        grace = s["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        conf = by_kind.get("ConfigMap", {}).get("mcp-cell-config", {}).get("data", {}).get("mcp.conf", "")
        m = re.search(r"^\s*timeout_max\s*=\s*(\d+)", conf, re.M)
        need = (int(m.group(1)) if m else 300) + 40
        if grace < need:
            problems.append(f"StatefulSet/{s['metadata']['name']}: terminationGracePeriodSeconds {grace} < {need} "
                            "(timeout_max + 40: the drain and the stop)")


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    problems, docs = [], []
    for f in sorted(Path(sys.argv[1]).glob("*.yaml")):
        if f.name == "kustomization.yaml":
            continue
        for i, doc in enumerate(yaml.safe_load_all(f.read_text())):
            if doc is None:
                continue
            docs.append(doc)
            check_object(doc, model_of(doc), f"{f.name}#{i}({doc.get('kind')})", problems)
    check_links(docs, problems)
    for p in problems:
        print(p)
    print(f"{len(docs)} objects checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
