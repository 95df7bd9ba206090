//! `rearrange`: a new hierarchy built from extracted parts of a layout
//! (docs/layouts.md, Structural transforms).

use crate::error::{brief, fail, Result};
use crate::layout::{Layout, Leaf};
use crate::node::Node;
use crate::profile::{check_nesting, ProfileToken};

/// One item of a [`Tree`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TreeNode {
    /// A leaf: in a selection it extracts a whole subtree; in an output it inserts `1:0`.
    Leaf,
    /// A leaf naming source `n` (in an output, it places that source).
    Id(usize),
    /// A nested tree.
    Tree(Tree),
}

/// A tree of [`TreeNode`]s: the selection and output hierarchies of [`Layout::rearrange`].
///
/// [`Tree::size`], [`Tree::depth`], [`Tree::recipe`] and dropping work without recursion on
/// any depth; the derived `Clone`, `Debug`, `PartialEq` and `Hash` recurse, like those of
/// any Rust tree, and [`Layout::rearrange`] rejects trees deeper than
/// [`MAX_NESTING`](crate::MAX_NESTING).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Tree {
    items: Vec<TreeNode>,
}

/// Dropping takes the tree apart without recursion, so even a tree nested far beyond
/// [`MAX_NESTING`](crate::MAX_NESTING) is dropped safely.
impl Drop for Tree {
    fn drop(&mut self) {
        let mut stack: Vec<TreeNode> = std::mem::take(&mut self.items);
        while let Some(item) = stack.pop() {
            if let TreeNode::Tree(mut sub) = item {
                stack.append(&mut sub.items);
            }
        }
    }
}

impl Tree {
    /// A tree whose top-level items are `items`.
    pub fn new(items: impl IntoIterator<Item = TreeNode>) -> Tree {
        Tree {
            items: items.into_iter().collect(),
        }
    }

    /// The top-level items.
    pub fn items(&self) -> &[TreeNode] {
        &self.items
    }

    /// The number of leaves (plain or named). Counted without recursion, so any depth is
    /// safe.
    pub fn size(&self) -> usize {
        let mut count = 0;
        let mut stack: Vec<&Tree> = vec![self];
        while let Some(tree) = stack.pop() {
            for item in &tree.items {
                match item {
                    TreeNode::Leaf | TreeNode::Id(_) => count += 1,
                    TreeNode::Tree(sub) => stack.push(sub),
                }
            }
        }
        count
    }

    /// The nesting depth, counted like [`Profile::depth`](crate::Profile::depth) (1 when
    /// flat), without recursion. [`Layout::rearrange`] rejects trees deeper than
    /// [`MAX_NESTING`](crate::MAX_NESTING).
    pub fn depth(&self) -> usize {
        let mut deepest = 1;
        let mut stack: Vec<(&Tree, usize)> = vec![(self, 1)];
        while let Some((tree, depth)) = stack.pop() {
            deepest = deepest.max(depth);
            for item in &tree.items {
                if let TreeNode::Tree(sub) = item {
                    stack.push((sub, depth + 1));
                }
            }
        }
        deepest
    }

    /// The structure with ids erased, as `Leaf`/`Push`/`Pop` tokens. Built without
    /// recursion, so any depth is safe.
    pub fn recipe(&self) -> Vec<ProfileToken> {
        let mut out = Vec::new();
        let mut stack: Vec<std::slice::Iter<'_, TreeNode>> = vec![self.items.iter()];
        while let Some(top) = stack.last_mut() {
            match top.next() {
                None => {
                    stack.pop();
                    if !stack.is_empty() {
                        out.push(ProfileToken::Pop);
                    }
                }
                Some(TreeNode::Leaf | TreeNode::Id(_)) => out.push(ProfileToken::Leaf),
                Some(TreeNode::Tree(tree)) => {
                    out.push(ProfileToken::Push);
                    stack.push(tree.items.iter());
                }
            }
        }
        out
    }
}

impl Tree {
    /// The output and selection trees that undo [`Layout::rearrange`] with `output` and
    /// `selection`: rearranging the result with them gives back the source's structure (an
    /// omitted singleton source comes back as `1:0`).
    ///
    /// The reverse selection is `output` with its ids erased (each output leaf is one
    /// source of the way back); the reverse output is `selection` with each leaf naming the
    /// output position its source went to, or a plain leaf (a singleton) for a source the
    /// output omitted. Fails on a duplicate id, an id beyond the selection's leaves, or a
    /// tree nested deeper than [`MAX_NESTING`](crate::MAX_NESTING).
    ///
    /// ```
    /// use strideweave_layout::{Layout, Tree, TreeNode};
    /// let a: Layout = "(2,3):(1,2)".parse()?;
    /// let out = Tree::new([TreeNode::Id(1), TreeNode::Leaf, TreeNode::Id(0)]);
    /// let sel = Tree::new([TreeNode::Leaf, TreeNode::Leaf]);
    /// let (back_out, back_sel) = Tree::reverse_rearrange(&out, &sel)?;
    /// let there = a.rearrange(&out, Some(&sel))?;
    /// assert_eq!(there.rearrange(&back_out, Some(&back_sel))?, a);
    /// # Ok::<(), strideweave_layout::LayoutError>(())
    /// ```
    pub fn reverse_rearrange(output: &Tree, selection: &Tree) -> Result<(Tree, Tree)> {
        check_nesting(output.depth(), &"reverse_rearrange output tree")?;
        check_nesting(selection.depth(), &"reverse_rearrange selection tree")?;
        let mut placed: Vec<Option<usize>> = vec![None; selection.size()];
        let mut position = 0;
        let reverse_selection = strip_ids(output, &mut placed, &mut position)?;
        let mut source = 0;
        let reverse_output = name_positions(selection, &placed, &mut source);
        Ok((reverse_output, reverse_selection))
    }
}

/// `output` with its ids erased, recording in `placed[source]` the output position of each
/// named source.
fn strip_ids(output: &Tree, placed: &mut [Option<usize>], position: &mut usize) -> Result<Tree> {
    let mut items = Vec::with_capacity(output.items.len());
    for item in &output.items {
        match item {
            TreeNode::Tree(sub) => items.push(TreeNode::Tree(strip_ids(sub, placed, position)?)),
            TreeNode::Id(source) => {
                let Some(slot) = placed.get_mut(*source) else {
                    fail!(
                        "reverse_rearrange output names source {source} of only {} selected",
                        placed.len()
                    );
                };
                if slot.replace(*position).is_some() {
                    fail!("reverse_rearrange output places source {source} twice");
                }
                items.push(TreeNode::Leaf);
                *position += 1;
            }
            TreeNode::Leaf => {
                items.push(TreeNode::Leaf);
                *position += 1;
            }
        }
    }
    Ok(Tree::new(items))
}

/// `selection` with each leaf naming where its source was placed (a plain leaf where the
/// output omitted it).
fn name_positions(selection: &Tree, placed: &[Option<usize>], source: &mut usize) -> Tree {
    let items = selection.items.iter().map(|item| match item {
        TreeNode::Tree(sub) => TreeNode::Tree(name_positions(sub, placed, source)),
        TreeNode::Leaf | TreeNode::Id(_) => {
            let named = placed[*source].map_or(TreeNode::Leaf, TreeNode::Id);
            *source += 1;
            named
        }
    });
    Tree::new(items.collect::<Vec<_>>())
}

impl Layout {
    /// Builds a new hierarchy from parts of `self`.
    ///
    /// The `selection` (default: every leaf, depth first) numbers the sources: each of its
    /// leaves extracts the whole subtree of `self` at that position. In `output`,
    /// [`TreeNode::Id`] places a source, [`TreeNode::Leaf`] inserts `1:0` and a nested tree
    /// nests. Fails on a duplicate or out-of-range id, a selection that does not fit `self`,
    /// an omitted source of size > 1, a tree nested deeper than
    /// [`MAX_NESTING`](crate::MAX_NESTING), or a result nested deeper than that.
    ///
    /// ```
    /// use strideweave_layout::{Layout, Tree, TreeNode};
    /// let a: Layout = "(2,3):(1,2)".parse()?;
    /// let out = Tree::new([TreeNode::Id(1), TreeNode::Leaf, TreeNode::Id(0)]);
    /// assert_eq!(a.rearrange(&out, None)?.to_string(), "(3,1,2):(2,0,1)");
    /// # Ok::<(), strideweave_layout::LayoutError>(())
    /// ```
    pub fn rearrange(&self, output: &Tree, selection: Option<&Tree>) -> Result<Layout> {
        let this = brief(self);
        check_nesting(output.depth(), &"rearrange output tree")?;
        if let Some(selection) = selection {
            check_nesting(selection.depth(), &"rearrange selection tree")?;
        }
        let sources: Vec<Node<Leaf>> = match selection {
            None => self.leaf_pairs().map(Node::Leaf).collect(),
            Some(selection) => {
                let mut sources = Vec::new();
                select(&self.nodes(), selection, self, &mut sources)?;
                sources
            }
        };
        let mut used = vec![false; sources.len()];
        let nodes = place(output, &sources, &mut used)?;
        for (i, source) in sources.iter().enumerate() {
            let mut leaves = Vec::new();
            source.leaves(&mut leaves);
            let size: usize = leaves.iter().map(|l| l.0).product();
            if !used[i] && size > 1 {
                fail!("rearrange of Layout {this} omits source {i} of size {size}");
            }
        }
        Layout::from_nodes(&nodes)
    }
}

fn select(
    nodes: &[Node<Leaf>],
    selection: &Tree,
    layout: &Layout,
    sources: &mut Vec<Node<Leaf>>,
) -> Result<()> {
    if nodes.len() != selection.items.len() {
        fail!(
            "rearrange selection has {} items where Layout {} has {} modes at that level",
            selection.items.len(),
            brief(layout),
            nodes.len()
        );
    }
    for (node, item) in nodes.iter().zip(&selection.items) {
        match (item, node) {
            (TreeNode::Leaf | TreeNode::Id(_), _) => sources.push(node.clone()),
            (TreeNode::Tree(sub), Node::Tuple(children)) => select(children, sub, layout, sources)?,
            (TreeNode::Tree(_), Node::Leaf(_)) => {
                fail!(
                    "rearrange selection nests deeper than Layout {}",
                    brief(layout)
                )
            }
        }
    }
    Ok(())
}

fn place(output: &Tree, sources: &[Node<Leaf>], used: &mut [bool]) -> Result<Vec<Node<Leaf>>> {
    output
        .items
        .iter()
        .map(|item| match item {
            TreeNode::Leaf => Ok(Node::Leaf((1, 0))),
            TreeNode::Id(i) => {
                let Some(source) = sources.get(*i) else {
                    fail!(
                        "rearrange output names source {i} of only {}",
                        sources.len()
                    );
                };
                if std::mem::replace(&mut used[*i], true) {
                    fail!("rearrange output places source {i} twice");
                }
                Ok(source.clone())
            }
            TreeNode::Tree(sub) => Ok(Node::Tuple(place(sub, sources, used)?)),
        })
        .collect()
}
