/*
 * sample.S - the default memory image, data/sample.bin.zst, compiled into the zfolio
 * binary so that "zfolio bench codec" runs anywhere without a data file.
 */
	.section .rodata
	.balign 64
	.globl zfolio_sample_start
	.hidden zfolio_sample_start
zfolio_sample_start:
	.incbin ZF_SAMPLE_PATH
	.globl zfolio_sample_end
	.hidden zfolio_sample_end
zfolio_sample_end:
	.section .note.GNU-stack,"",@progbits
