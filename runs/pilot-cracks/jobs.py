# the Cracks learnability pilot (issue 58): the full 2^4 at twice wave 2's pretraining steps, seeds 900-901 (a first sitting of seeds 900-902 with --save_at 0.5 was stopped after 2 jobs: at 0.5 the context-128 runs had not yet trained at 128, their sequence-length warmup holds the first half at 64)
import itertools
D = "runs/pilot-cracks"
base = ("--vocab_size 1024 --eval_interval 1000 --ptq_bits '' --task_mix 0.5 --task_list passkey_short "
        "--task_loss answer --quiet")
evalf = ("--tasks ppl,passkey_short --depths 5 --samples 26 --score exact --rank false --ppl_tokens 16384 "
         "--longppl_short 32 --alpha 0.5 --beta 4 --quiet --target 512")
for seed in (900, 901):
    for qk, kv, w, ctx in itertools.product(("none", "head"), (2, 1), (0, 64), (64, 128)):
        run = f"{D}/0.1M_qk{qk}_kv{kv}_w{w}_ctx{ctx}_s{seed}"
        swa = " --window 64 --global_every 2" if w else ""
        pre = " --short_frac 0.5 --short_block 64 --short_warmup" if ctx == 128 else ""
        fac = 512 // ctx
        ext = (f"--method ntk --token_frac 0.05 --factor {fac} --short_frac 0.25 --task_rows short --layers global "
               f"--quiet")
        line = (f"python train.py --size 0.1M --qk_norm {qk} --n_kv_head {kv}{swa} --block_size {ctx}{pre} "
                f"--batch_size {2048 // ctx} --iters 1536 --save_at 0.75 --seed {seed} {base} --out_dir {run}"
                f" && python evaluate.py {run} --lengths {ctx},512 --probe_samples 4 {evalf}"
                f" && python extend.py {run} {ext} --out_dir {run}-ntk512-f0.05"
                f" && python evaluate.py {run}-ntk512-f0.05 --lengths 512 --probe_samples 4 {evalf}"
                f" && python extend.py {run} --ckpt 0.75 {ext} --out_dir {run}-ntk512-f0.05-at0.75"
                f" && python evaluate.py {run}-ntk512-f0.05-at0.75 --lengths 512 --no_probes {evalf}")
        print(line)
