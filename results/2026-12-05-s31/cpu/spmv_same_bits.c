#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include "kernels/nm_spmv_cpu.h"
void old_spmv(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols, const float *x, int64_t ldx, int B, float *y, int64_t ldy);
static uint32_t rs=1; static uint32_t rnd(void){rs=rs*1664525u+1013904223u;return rs;}
int main(void){
  int bad=0;
  for(int trial=0;trial<200;trial++){
    int64_t rows=1+rnd()%9, cols=32*(1+rnd()%70); int B=1+rnd()%70;
    int unstruct=trial%3==0;
    uint32_t*mask=calloc(rows*cols/32,4); uint16_t*vals=calloc(rows*cols/2+1,2);
    for(int64_t r=0;r<rows;r++){ int64_t kept=0;
      for(int64_t w=0;w<cols/32;w++){ uint32_t m=0;
        if(unstruct){ for(int j=0;j<32;j++) if(rnd()%3==0 && kept < cols/2){m|=1u<<j;kept++;} }
        else { for(int g=0;g<8;g++){ int a=rnd()%4,b=(a+1+rnd()%3)%4; m|=(1u<<(4*g+a))|(1u<<(4*g+b)); } kept+=16; }
        mask[r*(cols/32)+w]=m; }
      for(int64_t k=0;k<cols/2;k++) vals[r*(cols/2)+k]=(uint16_t)(0x3c00+ (rnd()%0x800) - 0x400 + ((rnd()&1)<<15)); }
    float*x=malloc(sizeof(float)*B*cols); for(int64_t i=0;i<B*cols;i++) x[i]=(float)((int)(rnd()%2001)-1000)/337.0f;
    float*y0=malloc(sizeof(float)*B*rows),*y1=malloc(sizeof(float)*B*rows);
    old_spmv(vals,mask,rows,cols,x,cols,B,y0,rows); sd_nm_spmv_cpu(vals,mask,rows,cols,x,cols,B,y1,rows);
    if(memcmp(y0,y1,sizeof(float)*B*rows)){bad++; printf("trial %d differs\n",trial);}
    free(mask);free(vals);free(x);free(y0);free(y1);}
  printf("%d of 200 differ\n",bad); return bad!=0;}
