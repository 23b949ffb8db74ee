#!/usr/bin/env python3
"""Fails when two source files of a crate import each other, directly or through others.

Each file is a module; its edges are the `crate::…` and `super::…` paths it names outside
comments and its `#[cfg(test)] mod tests`, resolved to the longest module-file prefix. A child
naming its own ancestors does not count (a parent re-exports and dispatches to its children).
Usage: module-cycles.py REPO_ROOT"""
import os,re,sys,itertools
from collections import defaultdict
root=sys.argv[1]
found=[]
def modpath(src, f):
    rel=os.path.relpath(f, src)[:-3].split(os.sep)
    if rel[-1] in ('lib','main','mod'): rel=rel[:-1]
    return tuple(rel)
for crate in sorted(os.listdir(os.path.join(root,'crates')))+['..tests']:
    src=os.path.join(root,'crates',crate,'src') if crate!='..tests' else os.path.join(root,'tests','src')
    if not os.path.isdir(src): continue
    files={}
    for d,_,fs in os.walk(src):
        for fn in fs:
            if fn.endswith('.rs'):
                p=os.path.join(d,fn); files[modpath(src,p)]=p
    mods=set(files)
    edges=defaultdict(set)
    for m,p in files.items():
        text=open(p).read()
        # strip test modules roughly
        text=re.split(r'#\[cfg\(test\)\]\s*mod tests\s*\{', text)[0]
        text=re.sub(r'//[^\n]*','',text)
        is_modfile = os.path.basename(p) in ('mod.rs','lib.rs','main.rs')
        base = m if is_modfile else m[:-1]  # the module whose children are siblings
        for mt in re.finditer(r'\b(crate|super(?:::super)*)::([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)', text):
            head,path=mt.group(1),mt.group(2).split('::')
            if head=='crate': start=()
            else:
                n=head.count('super'); start = (m if is_modfile else m[:-1])
                start = m[:len(m)-n] if is_modfile else m[:len(m)-1-n]
                start=tuple(start)
            full=start+tuple(path)
            # longest prefix that is a module file
            for k in range(len(full),0,-1):
                if full[:k] in mods:
                    t=full[:k]
                    if t!=m and not (t==m[:len(t)]): edges[m].add(t)  # ignore own ancestors
                    break
    # find cycles (SCCs)
    idx={};low={};st=[];on=set();out=[];c=[0]
    def sc(v):
        idx[v]=low[v]=c[0];c[0]+=1;st.append(v);on.add(v)
        for w in edges[v]:
            if w not in idx: sc(w);low[v]=min(low[v],low[w])
            elif w in on: low[v]=min(low[v],idx[w])
        if low[v]==idx[v]:
            comp=[]
            while True:
                w=st.pop();on.discard(w);comp.append(w)
                if w==v:break
            if len(comp)>1: out.append(comp)
    sys.setrecursionlimit(10000)
    for v in list(files):
        if v not in idx: sc(v)
    for comp in out:
        found.append(crate + ': ' + ' <-> '.join('/'.join(x) or 'lib' for x in comp))

if found:
    print("import cycles between files (make one side import the other, or move what both need below them):")
    print("\n".join(found))
    sys.exit(1)
print("no import cycles between files")
