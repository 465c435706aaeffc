//! Loading the deployment manifests under `manifests/` and applying them with server-side dry run.
//!
//! Every `*.yaml`/`*.yml` file is read as a multi-document stream and every non-empty document must
//! be an API object. Kustomization files are not API objects: they are not applied, but every file
//! or directory they reference must exist, and the files they use as generator inputs or patches
//! (not standalone objects either) are skipped. A kustomization's `namespace:` is the default
//! namespace of the documents in its directory tree, as `kustomize build` would set it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::discovery::{Discovery, Scope};
use serde::Deserialize as _;
use serde_json::{Value, json};

const KUSTOMIZATION_NAMES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// One YAML document of a manifest file.
#[derive(Debug)]
pub struct ManifestDoc {
    /// The file it came from.
    pub file: PathBuf,
    /// Its position in the file (0-based, empty documents counted).
    pub index: usize,
    /// The object.
    pub object: Value,
    /// Namespace to use when the object is namespaced and names none.
    pub default_namespace: String,
}

impl ManifestDoc {
    /// `file#index kind/name` for messages.
    pub fn describe(&self) -> String {
        format!(
            "{}#{} {}/{}",
            self.file.display(),
            self.index,
            self.object["kind"].as_str().unwrap_or("?"),
            self.object["metadata"]["name"].as_str().unwrap_or("?")
        )
    }
}

/// Everything found under the manifests directory.
#[derive(Debug, Default)]
pub struct ManifestSet {
    /// The API objects to apply.
    pub docs: Vec<ManifestDoc>,
    /// Kustomization files found (checked, not applied).
    pub kustomizations: Vec<PathBuf>,
    /// Files skipped because a kustomization uses them as generator input or patch.
    pub skipped: Vec<PathBuf>,
}

/// Reads every YAML document under `root`; fails if `root` is missing, a referenced file is
/// missing, a document is not an object with `apiVersion`, `kind` and `metadata.name`, or no
/// document is found at all.
pub fn load(root: &Path) -> anyhow::Result<ManifestSet> {
    ensure!(
        root.is_dir(),
        "manifests directory {} does not exist",
        root.display()
    );
    let files = yaml_files(root)?;
    let mut set = ManifestSet::default();
    let mut not_objects = BTreeSet::new();
    let mut namespaces = BTreeMap::new();
    for file in files.iter().filter(|f| is_kustomization(f)) {
        let k: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(file)?)
            .with_context(|| format!("parse {}", file.display()))?;
        let dir = file.parent().expect("file has a parent");
        check_kustomization(file, dir, &k, &mut not_objects)?;
        if let Some(ns) = k["namespace"].as_str() {
            namespaces.insert(dir.to_owned(), ns.to_owned());
        }
        set.kustomizations.push(file.clone());
    }
    for file in files.iter().filter(|f| !is_kustomization(f)) {
        if not_objects.contains(&canonical(file)) {
            set.skipped.push(file.clone());
            continue;
        }
        let text = std::fs::read_to_string(file)?;
        for (index, doc) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
            let object = Value::deserialize(doc)
                .with_context(|| format!("parse {}#{index}", file.display()))?;
            if object.is_null() {
                continue;
            }
            for field in ["/apiVersion", "/kind", "/metadata/name"] {
                ensure!(
                    object.pointer(field).is_some_and(Value::is_string),
                    "{}#{index} is not an API object: {field} missing",
                    file.display()
                );
            }
            let default_namespace = file
                .ancestors()
                .skip(1)
                .take_while(|d| d.starts_with(root))
                .find_map(|d| namespaces.get(d).cloned())
                .unwrap_or_else(|| "default".to_owned());
            set.docs.push(ManifestDoc {
                file: file.clone(),
                index,
                object,
                default_namespace,
            });
        }
    }
    ensure!(
        !set.docs.is_empty(),
        "no API objects found under {}",
        root.display()
    );
    Ok(set)
}

/// The objects of rendered YAML (`kubectl kustomize` output), as coming from `origin`.
pub fn from_rendered(text: &str, origin: &Path) -> anyhow::Result<ManifestSet> {
    let mut set = ManifestSet::default();
    for (index, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let object = Value::deserialize(doc)
            .with_context(|| format!("parse {}#{index}", origin.display()))?;
        if object.is_null() {
            continue;
        }
        set.docs.push(ManifestDoc {
            file: origin.to_owned(),
            index,
            object,
            default_namespace: "default".to_owned(),
        });
    }
    ensure!(!set.docs.is_empty(), "{} renders nothing", origin.display());
    Ok(set)
}

fn is_kustomization(file: &Path) -> bool {
    file.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| KUSTOMIZATION_NAMES.contains(&n))
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_owned())
}

/// All YAML files under `dir` (and kustomization files without extension), sorted.
fn yaml_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| format!("read {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if is_kustomization(&path)
                || path.extension().is_some_and(|e| e == "yaml" || e == "yml")
            {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Checks that every path a kustomization references exists; records generator inputs and patch
/// files (which are not standalone API objects) in `not_objects`.
fn check_kustomization(
    file: &Path,
    dir: &Path,
    k: &Value,
    not_objects: &mut BTreeSet<PathBuf>,
) -> anyhow::Result<()> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let mut resources = Vec::new();
    let mut inputs = Vec::new();
    for key in ["resources", "components", "crds"] {
        resources.extend(strings(&k[key]));
    }
    for generator in ["configMapGenerator", "secretGenerator"] {
        for g in k[generator].as_array().into_iter().flatten() {
            // `files` entries are `path` or `key=path`.
            inputs.extend(
                strings(&g["files"])
                    .into_iter()
                    .map(|f| f.rsplit('=').next().unwrap_or_default().to_owned()),
            );
            inputs.extend(strings(&g["envs"]));
            inputs.extend(g["env"].as_str().map(str::to_owned));
        }
    }
    for key in ["patches", "patchesJson6902", "replacements"] {
        for p in k[key].as_array().into_iter().flatten() {
            inputs.extend(p["path"].as_str().map(str::to_owned));
        }
    }
    // Entries of patchesStrategicMerge are file paths or inline patches (multi-line).
    inputs.extend(
        strings(&k["patchesStrategicMerge"])
            .into_iter()
            .filter(|p| !p.contains('\n')),
    );

    let mut missing = Vec::new();
    for reference in resources.iter().chain(&inputs) {
        if reference.contains("://") || reference.starts_with("github.com/") {
            continue; // remote bases are not checked
        }
        let path = dir.join(reference);
        if !path.exists() {
            missing.push(reference.clone());
        }
    }
    if !missing.is_empty() {
        bail!(
            "{} references missing files: {}",
            file.display(),
            missing.join(", ")
        );
    }
    not_objects.extend(inputs.iter().map(|i| canonical(&dir.join(i))));
    Ok(())
}

/// Applies every document with server-side apply in dry-run mode (field manager `placer-e2e`);
/// returns one line per rejected document. Namespaces that namespaced documents live in are
/// created for real first: a dry-run Namespace is not there for the objects inside it.
pub async fn dry_run_apply(
    client: &kube::Client,
    set: &ManifestSet,
) -> anyhow::Result<Vec<String>> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .context("API discovery")?;
    let mut failures = Vec::new();
    for doc in &set.docs {
        if let Err(e) = dry_run_one(client, &discovery, doc).await {
            failures.push(format!("{}: {e:#}", doc.describe()));
        }
    }
    Ok(failures)
}

async fn dry_run_one(
    client: &kube::Client,
    discovery: &Discovery,
    doc: &ManifestDoc,
) -> anyhow::Result<()> {
    let api_version = doc.object["apiVersion"].as_str().unwrap_or_default();
    let kind = doc.object["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let Some((resource, caps)) = discovery.resolve_gvk(&gvk) else {
        bail!("the API server does not serve {api_version} {kind}");
    };
    let name = doc.object["metadata"]["name"].as_str().unwrap_or_default();
    let object: DynamicObject = serde_json::from_value(doc.object.clone())?;
    let api: Api<DynamicObject> = match caps.scope {
        Scope::Cluster => Api::all_with(client.clone(), &resource),
        Scope::Namespaced => {
            let ns = object
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| doc.default_namespace.clone());
            ensure_namespace(client, &ns).await?;
            Api::namespaced_with(client.clone(), &ns, &resource)
        }
    };
    api.patch(
        name,
        &PatchParams::apply("placer-e2e").dry_run(),
        &Patch::Apply(&object),
    )
    .await?;
    Ok(())
}

async fn ensure_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let api = Api::<Namespace>::all(client.clone());
    if api.get_opt(name).await?.is_some() {
        return Ok(());
    }
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": name } }))?;
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("create namespace {name}")),
    }
}
