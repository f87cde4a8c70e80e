/*
 * cnn.c — the convolutional zoo families: alexnet, resnet101, inception_v3.
 *
 * Each follows the torchvision definition layer for layer (so parameter
 * counts match the published ones exactly) in NCHW fp32, ending in a
 * softmax cross-entropy loss against labels[N]. Op names follow torchvision's
 * module names ("conv2_1.conv1" for ResNet's stage 2 block 1, "Mixed_6b.
 * branch7x7_2.conv" for Inception). Keys (zoo.c order): classes, image.
 *
 *   alexnet       61,100,840 parameters at 224x224 (the feature map before the
 *                 classifier must be 6x6 there; other image sizes change fc6).
 *   resnet101     44,549,160 parameters (v1.5: the stride sits in the 3x3 conv).
 *   inception_v3  23,834,568 parameters: torchvision's model WITHOUT the
 *                 auxiliary classifier (27,161,264 with it), 299x299 input.
 */
#include "zoo.h"

#include <stdio.h>

static int64_t dim_of(zb *b, int t, int i)
{
    if (b->err || t < 0)
        return 1;
    return ss_graph_tensor(b->g, t)->shape[i];
}

static void image_inputs(zb *b, int64_t batch, int64_t image, int *x, int *labels)
{
    int64_t xs[4] = {batch, 3, image, image};
    ss_dim_kind xk[4] = {SS_DIM_SAMPLE, SS_DIM_PARAMETER, SS_DIM_ATTRIBUTE, SS_DIM_ATTRIBUTE};
    *x = zb_input(b, "image", 4, xs, xk, b->act);
    ss_dim_kind lk[1] = {SS_DIM_SAMPLE};
    *labels = zb_input(b, "labels", 1, &batch, lk, SS_I32);
}

/* Global average pool to 1x1, flatten to [N, C], optional dropout, fc, loss. */
static void classifier(zb *b, int x, int labels, int64_t classes, double dropout)
{
    int64_t n = dim_of(b, x, 0), c = dim_of(b, x, 1);
    int64_t h = dim_of(b, x, 2), w = dim_of(b, x, 3);
    ss_op_attrs a = {0};
    a.pool = SS_POOL_AVG;
    a.kernel[0] = h;
    a.kernel[1] = w;
    a.stride[0] = h;
    a.stride[1] = w;
    x = zb_out(b, zb_add(b, "avgpool", SS_OP_POOL2D, &a, 1, &x, -1, NULL), 0);
    int64_t shape[2] = {n, c};
    x = zb_reshape(b, "flatten", x, 2, shape);
    if (dropout > 0)
        x = zb_dropout(b, "dropout", x, dropout);
    x = zb_linear(b, "fc", x, classes, 1);
    zb_softmax_ce(b, "loss", x, labels);
}

/* ------------------------------------------------------------------ */
/* AlexNet                                                              */
/* ------------------------------------------------------------------ */

void ss_zoo_build_alexnet(zb *b, int64_t batch, const int64_t *p)
{
    int64_t classes = p[0], image = p[1];
    int x, labels;
    image_inputs(b, batch, image, &x, &labels);
    x = zb_conv(b, "conv1", x, 64, 11, 11, 4, 4, 2, 2, 1);
    x = zb_unary(b, "relu1", x, SS_UNARY_RELU);
    x = zb_pool(b, "pool1", x, SS_POOL_MAX, 3, 2, 0);
    x = zb_conv(b, "conv2", x, 192, 5, 5, 1, 1, 2, 2, 1);
    x = zb_unary(b, "relu2", x, SS_UNARY_RELU);
    x = zb_pool(b, "pool2", x, SS_POOL_MAX, 3, 2, 0);
    x = zb_conv(b, "conv3", x, 384, 3, 3, 1, 1, 1, 1, 1);
    x = zb_unary(b, "relu3", x, SS_UNARY_RELU);
    x = zb_conv(b, "conv4", x, 256, 3, 3, 1, 1, 1, 1, 1);
    x = zb_unary(b, "relu4", x, SS_UNARY_RELU);
    x = zb_conv(b, "conv5", x, 256, 3, 3, 1, 1, 1, 1, 1);
    x = zb_unary(b, "relu5", x, SS_UNARY_RELU);
    x = zb_pool(b, "pool5", x, SS_POOL_MAX, 3, 2, 0);
    int64_t shape[2] = {batch, dim_of(b, x, 1) * dim_of(b, x, 2) * dim_of(b, x, 3)};
    x = zb_reshape(b, "flatten", x, 2, shape);
    x = zb_dropout(b, "dropout6", x, 0.5);
    x = zb_linear(b, "fc6", x, 4096, 1);
    x = zb_unary(b, "relu6", x, SS_UNARY_RELU);
    x = zb_dropout(b, "dropout7", x, 0.5);
    x = zb_linear(b, "fc7", x, 4096, 1);
    x = zb_unary(b, "relu7", x, SS_UNARY_RELU);
    x = zb_linear(b, "fc8", x, classes, 1);
    zb_softmax_ce(b, "loss", x, labels);
}

/* ------------------------------------------------------------------ */
/* ResNet-101                                                          */
/* ------------------------------------------------------------------ */

/* Bottleneck block "convS_B": 1x1 w, 3x3 w (stride), 1x1 4w, + shortcut. */
static int bottleneck(zb *b, const char *blk, int x, int64_t width, int64_t stride, int first)
{
    int y = zb_conv(b, zb_name(b, "%s.conv1", blk), x, width, 1, 1, 1, 1, 0, 0, 0);
    y = zb_norm(b, zb_name(b, "%s.bn1", blk), y, SS_OP_BATCHNORM);
    y = zb_unary(b, zb_name(b, "%s.relu1", blk), y, SS_UNARY_RELU);
    y = zb_conv(b, zb_name(b, "%s.conv2", blk), y, width, 3, 3, stride, stride, 1, 1, 0);
    y = zb_norm(b, zb_name(b, "%s.bn2", blk), y, SS_OP_BATCHNORM);
    y = zb_unary(b, zb_name(b, "%s.relu2", blk), y, SS_UNARY_RELU);
    y = zb_conv(b, zb_name(b, "%s.conv3", blk), y, 4 * width, 1, 1, 1, 1, 0, 0, 0);
    y = zb_norm(b, zb_name(b, "%s.bn3", blk), y, SS_OP_BATCHNORM);
    int sc = x;
    if (first) {
        sc = zb_conv(b, zb_name(b, "%s.downsample", blk), x, 4 * width, 1, 1, stride, stride, 0,
                     0, 0);
        sc = zb_norm(b, zb_name(b, "%s.downsample_bn", blk), sc, SS_OP_BATCHNORM);
    }
    y = zb_binary(b, zb_name(b, "%s.add", blk), y, sc, SS_BINARY_ADD);
    return zb_unary(b, zb_name(b, "%s.relu", blk), y, SS_UNARY_RELU);
}

void ss_zoo_build_resnet101(zb *b, int64_t batch, const int64_t *p)
{
    static const int blocks[4] = {3, 4, 23, 3};
    int64_t classes = p[0], image = p[1];
    int x, labels;
    image_inputs(b, batch, image, &x, &labels);
    x = zb_conv(b, "conv1", x, 64, 7, 7, 2, 2, 3, 3, 0);
    x = zb_norm(b, "bn1", x, SS_OP_BATCHNORM);
    x = zb_unary(b, "relu1", x, SS_UNARY_RELU);
    x = zb_pool(b, "maxpool", x, SS_POOL_MAX, 3, 2, 1);
    for (int s = 0; s < 4; s++) {
        int64_t width = INT64_C(64) << s;
        for (int k = 0; k < blocks[s]; k++) {
            char blk[32];
            snprintf(blk, sizeof blk, "conv%d_%d", s + 2, k + 1);
            x = bottleneck(b, blk, x, width, k == 0 && s > 0 ? 2 : 1, k == 0);
        }
    }
    classifier(b, x, labels, classes, 0);
}

/* ------------------------------------------------------------------ */
/* Inception-v3                                                        */
/* ------------------------------------------------------------------ */

/* torchvision's BasicConv2d: conv (no bias) + batchnorm + relu. */
static int basic(zb *b, const char *blk, const char *br, int x, int64_t out, int64_t kh,
                 int64_t kw, int64_t s, int64_t ph, int64_t pw)
{
    x = zb_conv(b, zb_name(b, "%s%s%s.conv", blk, *blk ? "." : "", br), x, out, kh, kw, s, s, ph,
                pw, 0);
    x = zb_norm(b, zb_name(b, "%s%s%s.bn", blk, *blk ? "." : "", br), x, SS_OP_BATCHNORM);
    return zb_unary(b, zb_name(b, "%s%s%s.relu", blk, *blk ? "." : "", br), x, SS_UNARY_RELU);
}

static int avg3(zb *b, const char *blk, int x)
{
    return zb_pool(b, zb_name(b, "%s.branch_pool.avgpool", blk), x, SS_POOL_AVG, 3, 1, 1);
}

static int cat(zb *b, const char *blk, int n, const int *xs)
{
    return zb_concat(b, zb_name(b, "%s.concat", blk), n, xs, 1);
}

static int inception_a(zb *b, const char *blk, int x, int64_t pool_features)
{
    int br[4];
    br[0] = basic(b, blk, "branch1x1", x, 64, 1, 1, 1, 0, 0);
    int t = basic(b, blk, "branch5x5_1", x, 48, 1, 1, 1, 0, 0);
    br[1] = basic(b, blk, "branch5x5_2", t, 64, 5, 5, 1, 2, 2);
    t = basic(b, blk, "branch3x3dbl_1", x, 64, 1, 1, 1, 0, 0);
    t = basic(b, blk, "branch3x3dbl_2", t, 96, 3, 3, 1, 1, 1);
    br[2] = basic(b, blk, "branch3x3dbl_3", t, 96, 3, 3, 1, 1, 1);
    t = avg3(b, blk, x);
    br[3] = basic(b, blk, "branch_pool", t, pool_features, 1, 1, 1, 0, 0);
    return cat(b, blk, 4, br);
}

static int inception_b(zb *b, const char *blk, int x)
{
    int br[3];
    br[0] = basic(b, blk, "branch3x3", x, 384, 3, 3, 2, 0, 0);
    int t = basic(b, blk, "branch3x3dbl_1", x, 64, 1, 1, 1, 0, 0);
    t = basic(b, blk, "branch3x3dbl_2", t, 96, 3, 3, 1, 1, 1);
    br[1] = basic(b, blk, "branch3x3dbl_3", t, 96, 3, 3, 2, 0, 0);
    br[2] = zb_pool(b, zb_name(b, "%s.branch_pool", blk), x, SS_POOL_MAX, 3, 2, 0);
    return cat(b, blk, 3, br);
}

static int inception_c(zb *b, const char *blk, int x, int64_t c7)
{
    int br[4];
    br[0] = basic(b, blk, "branch1x1", x, 192, 1, 1, 1, 0, 0);
    int t = basic(b, blk, "branch7x7_1", x, c7, 1, 1, 1, 0, 0);
    t = basic(b, blk, "branch7x7_2", t, c7, 1, 7, 1, 0, 3);
    br[1] = basic(b, blk, "branch7x7_3", t, 192, 7, 1, 1, 3, 0);
    t = basic(b, blk, "branch7x7dbl_1", x, c7, 1, 1, 1, 0, 0);
    t = basic(b, blk, "branch7x7dbl_2", t, c7, 7, 1, 1, 3, 0);
    t = basic(b, blk, "branch7x7dbl_3", t, c7, 1, 7, 1, 0, 3);
    t = basic(b, blk, "branch7x7dbl_4", t, c7, 7, 1, 1, 3, 0);
    br[2] = basic(b, blk, "branch7x7dbl_5", t, 192, 1, 7, 1, 0, 3);
    t = avg3(b, blk, x);
    br[3] = basic(b, blk, "branch_pool", t, 192, 1, 1, 1, 0, 0);
    return cat(b, blk, 4, br);
}

static int inception_d(zb *b, const char *blk, int x)
{
    int br[3];
    int t = basic(b, blk, "branch3x3_1", x, 192, 1, 1, 1, 0, 0);
    br[0] = basic(b, blk, "branch3x3_2", t, 320, 3, 3, 2, 0, 0);
    t = basic(b, blk, "branch7x7x3_1", x, 192, 1, 1, 1, 0, 0);
    t = basic(b, blk, "branch7x7x3_2", t, 192, 1, 7, 1, 0, 3);
    t = basic(b, blk, "branch7x7x3_3", t, 192, 7, 1, 1, 3, 0);
    br[1] = basic(b, blk, "branch7x7x3_4", t, 192, 3, 3, 2, 0, 0);
    br[2] = zb_pool(b, zb_name(b, "%s.branch_pool", blk), x, SS_POOL_MAX, 3, 2, 0);
    return cat(b, blk, 3, br);
}

static int inception_e(zb *b, const char *blk, int x)
{
    int br[6];
    br[0] = basic(b, blk, "branch1x1", x, 320, 1, 1, 1, 0, 0);
    int t = basic(b, blk, "branch3x3_1", x, 384, 1, 1, 1, 0, 0);
    br[1] = basic(b, blk, "branch3x3_2a", t, 384, 1, 3, 1, 0, 1);
    br[2] = basic(b, blk, "branch3x3_2b", t, 384, 3, 1, 1, 1, 0);
    t = basic(b, blk, "branch3x3dbl_1", x, 448, 1, 1, 1, 0, 0);
    t = basic(b, blk, "branch3x3dbl_2", t, 384, 3, 3, 1, 1, 1);
    br[3] = basic(b, blk, "branch3x3dbl_3a", t, 384, 1, 3, 1, 0, 1);
    br[4] = basic(b, blk, "branch3x3dbl_3b", t, 384, 3, 1, 1, 1, 0);
    t = avg3(b, blk, x);
    br[5] = basic(b, blk, "branch_pool", t, 192, 1, 1, 1, 0, 0);
    /* torchvision concatenates 3x3_2a/2b and 3x3dbl_3a/3b first; one concat
     * of all six in the same channel order is the same tensor. */
    return cat(b, blk, 6, br);
}

void ss_zoo_build_inception_v3(zb *b, int64_t batch, const int64_t *p)
{
    int64_t classes = p[0], image = p[1];
    int x, labels;
    image_inputs(b, batch, image, &x, &labels);
    x = basic(b, "", "Conv2d_1a_3x3", x, 32, 3, 3, 2, 0, 0);
    x = basic(b, "", "Conv2d_2a_3x3", x, 32, 3, 3, 1, 0, 0);
    x = basic(b, "", "Conv2d_2b_3x3", x, 64, 3, 3, 1, 1, 1);
    x = zb_pool(b, "maxpool1", x, SS_POOL_MAX, 3, 2, 0);
    x = basic(b, "", "Conv2d_3b_1x1", x, 80, 1, 1, 1, 0, 0);
    x = basic(b, "", "Conv2d_4a_3x3", x, 192, 3, 3, 1, 0, 0);
    x = zb_pool(b, "maxpool2", x, SS_POOL_MAX, 3, 2, 0);
    x = inception_a(b, "Mixed_5b", x, 32);
    x = inception_a(b, "Mixed_5c", x, 64);
    x = inception_a(b, "Mixed_5d", x, 64);
    x = inception_b(b, "Mixed_6a", x);
    x = inception_c(b, "Mixed_6b", x, 128);
    x = inception_c(b, "Mixed_6c", x, 160);
    x = inception_c(b, "Mixed_6d", x, 160);
    x = inception_c(b, "Mixed_6e", x, 192);
    x = inception_d(b, "Mixed_7a", x);
    x = inception_e(b, "Mixed_7b", x);
    x = inception_e(b, "Mixed_7c", x);
    classifier(b, x, labels, classes, 0.5);
}
