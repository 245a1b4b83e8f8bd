import json
# Prints every case where PyTorch (torch{,2,3,4}_r*.json from probe*.py under torchrun) and dtensor
# (dt{,2,3,4}_r*.json from probe.cc under mpirun) differ in placements, shapes, local values or in
# raising. Run in the directory holding both sets of files.

for tag in ('', '2', '3', '4'):
  print('== round', tag or '1')
  for r in range(4):
      T={e['case']:e for e in json.load(open('torch%s_r%d.json'%(tag,r)))}
      D={e['case']:e for e in json.loads(open('dt%s_r%d.json'%(tag,r)).read().replace('-inf','-Infinity').replace(',inf',',Infinity').replace('[inf','[Infinity').replace('nan','NaN'))}
      for k in T:
          t=T[k]; d=D.get(k)
          if d is None: print(r,k,'MISSING in dt'); continue
          if 'error' in t or 'error' in d:
              if ('error' in t)!=('error' in d): print(r,k,'ERRDIFF torch:',t.get('error',t.get('placements')),'| dt:',d.get('error',d.get('placements')))
              continue
          if 'value' in t: print(r,k,'torch value',t['value']); continue
          diffs=[]
          for f in ('placements','lshape','gshape'):
              if t[f]!=d[f]: diffs.append('%s torch=%s dt=%s'%(f,t[f],d[f]))
          if len(t['local'])!=len(d['local']) or any(abs(a-b)>1e-5*max(1,abs(a)) for a,b in zip(t['local'],d['local'])):
              diffs.append('local torch=%s dt=%s'%(t['local'][:12],d['local'][:12]))
          if diffs: print(r,k,'; '.join(diffs))