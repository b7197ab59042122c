/*
 * interp: a switch-dispatched bytecode interpreter (16 64-bit registers,
 * a word-addressed data memory) running a small program with two phases:
 *
 *   1. Collatz: for n = 1 .. COLLATZ_LIMIT, count the steps of the 3x+1
 *      iteration until x == 1; acc = acc * 31 + (steps ^ n)   -> r3
 *   2. Sieve of Eratosthenes below SIEVE_LIMIT in data memory;
 *      number of primes -> r11, sum of primes -> r12
 *
 *   checksum = mix64(mix64(mix64(0, r3), r11), r12)
 *
 * Lots of hard-to-predict indirect branches (the dispatch) and
 * conditional branches (the bytecode's own). The program is assembled at
 * run time by a tiny label-resolving assembler so it stays readable.
 */
#include <stdio.h>

#include "guest.h"

#define COLLATZ_LIMIT 500
#define SIEVE_LIMIT   3000

enum opcode {
	OP_LI,		/* ra = imm */
	OP_MOV,		/* ra = rb */
	OP_ADD,		/* ra = rb + rc */
	OP_ADDI,	/* ra = rb + imm */
	OP_MUL,		/* ra = rb * rc */
	OP_XOR,		/* ra = rb ^ rc */
	OP_ANDI,	/* ra = rb & imm */
	OP_SHRI,	/* ra = rb >> imm */
	OP_LD,		/* ra = mem[rb + imm] */
	OP_ST,		/* mem[rb + imm] = ra */
	OP_BEQ,		/* if (ra == rb) goto imm */
	OP_BNE,		/* if (ra != rb) goto imm */
	OP_BLTU,	/* if (ra <  rb) goto imm (unsigned) */
	OP_BGEU,	/* if (ra >= rb) goto imm (unsigned) */
	OP_JMP,		/* goto imm */
	OP_HALT,
};

struct insn {
	uint8_t op, a, b, c;
	int32_t imm;
};

/* ---- a tiny assembler with forward labels ---------------------------- */

enum label {
	L_LOOP_N, L_LOOP_X, L_EVEN, L_NEXT_X, L_DONE_X,
	L_OUTER, L_INNER, L_NEXT_I, L_END,
	NUM_LABELS
};

#define MAX_INSNS 64

static struct insn program[MAX_INSNS];
static int program_len;
static int label_pc[NUM_LABELS];

static void emit(enum opcode op, int a, int b, int c, int32_t imm)
{
	program[program_len++] = (struct insn){ op, a, b, c, imm };
}

/* Branches store the label number in imm until resolve() runs. */
static void branch(enum opcode op, int a, int b, enum label target)
{
	emit(op, a, b, 0, target);
}

static void here(enum label l)
{
	label_pc[l] = program_len;
}

static void resolve(void)
{
	for (int i = 0; i < program_len; i++) {
		enum opcode op = program[i].op;
		if (op == OP_BEQ || op == OP_BNE || op == OP_BLTU ||
		    op == OP_BGEU || op == OP_JMP)
			program[i].imm = label_pc[program[i].imm];
	}
}

static void assemble(void)
{
	/* r0 is always zero (never written) */

	/* phase 1: Collatz. r1 = n, r2 = limit, r3 = acc, r4 = 1, r9 = 31 */
	emit(OP_LI, 1, 0, 0, 1);
	emit(OP_LI, 2, 0, 0, COLLATZ_LIMIT + 1);
	emit(OP_LI, 3, 0, 0, 0);
	emit(OP_LI, 4, 0, 0, 1);
	emit(OP_LI, 9, 0, 0, 31);
	here(L_LOOP_N);
	emit(OP_MOV, 5, 1, 0, 0);		/* x = n */
	emit(OP_LI, 6, 0, 0, 0);		/* steps = 0 */
	here(L_LOOP_X);
	branch(OP_BEQ, 5, 4, L_DONE_X);		/* x == 1? */
	emit(OP_ANDI, 7, 5, 0, 1);
	branch(OP_BEQ, 7, 0, L_EVEN);
	emit(OP_ADD, 8, 5, 5, 0);		/* x = 3x + 1 */
	emit(OP_ADD, 5, 8, 5, 0);
	emit(OP_ADDI, 5, 5, 0, 1);
	branch(OP_JMP, 0, 0, L_NEXT_X);
	here(L_EVEN);
	emit(OP_SHRI, 5, 5, 0, 1);		/* x = x / 2 */
	here(L_NEXT_X);
	emit(OP_ADDI, 6, 6, 0, 1);
	branch(OP_JMP, 0, 0, L_LOOP_X);
	here(L_DONE_X);
	emit(OP_MUL, 3, 3, 9, 0);		/* acc = acc * 31 + (steps ^ n) */
	emit(OP_XOR, 10, 6, 1, 0);
	emit(OP_ADD, 3, 3, 10, 0);
	emit(OP_ADDI, 1, 1, 0, 1);
	branch(OP_BLTU, 1, 2, L_LOOP_N);

	/* phase 2: sieve. r1 = i, r2 = limit, r4 = j, r11 = count,
	 * r12 = sum, r13 = 1, r14 = mem[i] */
	emit(OP_LI, 1, 0, 0, 2);
	emit(OP_LI, 2, 0, 0, SIEVE_LIMIT);
	emit(OP_LI, 11, 0, 0, 0);
	emit(OP_LI, 12, 0, 0, 0);
	emit(OP_LI, 13, 0, 0, 1);
	here(L_OUTER);
	branch(OP_BGEU, 1, 2, L_END);
	emit(OP_LD, 14, 1, 0, 0);
	branch(OP_BNE, 14, 0, L_NEXT_I);	/* composite */
	emit(OP_ADDI, 11, 11, 0, 1);
	emit(OP_ADD, 12, 12, 1, 0);
	emit(OP_MUL, 4, 1, 1, 0);		/* j = i * i */
	here(L_INNER);
	branch(OP_BGEU, 4, 2, L_NEXT_I);
	emit(OP_ST, 13, 4, 0, 0);		/* mem[j] = 1 */
	emit(OP_ADD, 4, 4, 1, 0);
	branch(OP_JMP, 0, 0, L_INNER);
	here(L_NEXT_I);
	emit(OP_ADDI, 1, 1, 0, 1);
	branch(OP_JMP, 0, 0, L_OUTER);
	here(L_END);
	emit(OP_HALT, 0, 0, 0, 0);

	resolve();
}

/* ---- the interpreter -------------------------------------------------- */

static uint64_t memory[SIEVE_LIMIT];

/* Runs until HALT; returns the number of bytecodes executed. */
static uint64_t run(const struct insn *code, uint64_t *r)
{
	const struct insn *ip = code;
	uint64_t executed = 0;

	for (;;) {
		const struct insn *in = ip++;
		executed++;
		switch (in->op) {
		case OP_LI:   r[in->a] = (uint64_t)(int64_t)in->imm; break;
		case OP_MOV:  r[in->a] = r[in->b]; break;
		case OP_ADD:  r[in->a] = r[in->b] + r[in->c]; break;
		case OP_ADDI: r[in->a] = r[in->b] + (uint64_t)(int64_t)in->imm; break;
		case OP_MUL:  r[in->a] = r[in->b] * r[in->c]; break;
		case OP_XOR:  r[in->a] = r[in->b] ^ r[in->c]; break;
		case OP_ANDI: r[in->a] = r[in->b] & (uint64_t)(int64_t)in->imm; break;
		case OP_SHRI: r[in->a] = r[in->b] >> in->imm; break;
		case OP_LD:   r[in->a] = memory[r[in->b] + in->imm]; break;
		case OP_ST:   memory[r[in->b] + in->imm] = r[in->a]; break;
		case OP_BEQ:  if (r[in->a] == r[in->b]) ip = code + in->imm; break;
		case OP_BNE:  if (r[in->a] != r[in->b]) ip = code + in->imm; break;
		case OP_BLTU: if (r[in->a] <  r[in->b]) ip = code + in->imm; break;
		case OP_BGEU: if (r[in->a] >= r[in->b]) ip = code + in->imm; break;
		case OP_JMP:  ip = code + in->imm; break;
		case OP_HALT: return executed;
		default:      return 0;	/* bad opcode: reported by main */
		}
	}
}

int main(void)
{
	uint64_t regs[16] = { 0 };

	assemble();
	uint64_t executed = run(program, regs);

	uint64_t h = mix64(mix64(mix64(0, regs[3]), regs[11]), regs[12]);
	printf("interp: %d insns, %llu executed, %llu primes\n", program_len,
	       (unsigned long long)executed, (unsigned long long)regs[11]);
	guest_print_checksum(h);
	return executed == 0;
}
